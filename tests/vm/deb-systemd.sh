#!/usr/bin/env bash
# Runs inside the Debian 12 VM of ../shared/vm (systemd 252, cgroup v2,
# Landlock ABI 2): installs the .deb, starts both services the way an admin
# would, drives them with the Python MCP SDK, restarts the supervisor under a
# live session, reloads the policy, and checks that systemd is content.
# Expects next to it: prims_*.deb, mcp_smoke.py, and mcp-site/ (the mcp SDK's
# site-packages for this python). Prints one PASS/FAIL line per check.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; fails=$((fails+1)); }
expect() { # name command...
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}
url=http://127.0.0.1:9000/mcp
smoke() { PYTHONPATH="$here/mcp-site" python3 "$here/mcp_smoke.py" "$url" "$@"; }
wait_health() {
  for _ in $(seq 1 100); do
    python3 -c 'import urllib.request,sys; urllib.request.urlopen("http://127.0.0.1:9000/health", timeout=2)' 2>/dev/null && return 0
    sleep 0.3
  done
  return 1
}

echo "== dpkg -i $(cd "$here" && ls prims_*.deb)"
expect deb_installs dpkg -i "$here"/prims_*.deb
expect deb_created_user_and_group getent passwd prims
expect deb_created_the_egress_user getent passwd prims-egress
expect deb_enables_nothing bash -c '! systemctl is-enabled -q prims-supervisor.service && ! systemctl is-enabled -q prims-mcp.service && ! systemctl is-active -q prims-supervisor.service'
expect deb_run_dir_for_group bash -c '[ "$(stat -c %U:%G:%a /run/prims)" = root:prims:750 ]'
expect deb_policy_is_a_conffile grep -qx /etc/prims/policy.toml /var/lib/dpkg/info/prims.conffiles
# The units' Documentation= names these files.
expect deb_ships_the_docs test -f /usr/share/doc/prims/README.md -a -f /usr/share/doc/prims/docs/operations.md
expect units_verify systemd-analyze verify prims-supervisor.service prims-mcp.service prims.slice

echo "== the admin edits /etc/prims/policy.toml (no PyPI here: no default packages, no IPython layer; 256 MiB workspaces on this 4 GB disk)"
sed -i 's/^default_packages = .*/default_packages = []/' /etc/prims/policy.toml
sed -i 's/^ipython_packages = .*/ipython_packages = []/' /etc/prims/policy.toml
# Each workspace reserves its quota and 1 GiB stays free: at 1 GiB each,
# the pool's two spares and a session would leave no room here.
sed -i 's/^disk_quota = .*/disk_quota = "256MiB"/' /etc/prims/policy.toml
expect policy_check prims policy check /etc/prims/policy.toml

echo "== systemctl enable --now prims-supervisor prims-mcp"
expect services_start systemctl enable --now prims-supervisor.service prims-mcp.service
# Type=notify: once systemctl returns, both must already accept connections.
expect ready_means_socket_accepts python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/prims/supervisor.sock")'
expect ready_means_port_accepts python3 -c 'import socket; socket.create_connection(("127.0.0.1", 9000), timeout=2)'
expect mcp_health wait_health
echo "-- prims doctor on this host:"
prims doctor --policy /etc/prims/policy.toml | sed 's/^/   /'
expect doctor_passes prims doctor --policy /etc/prims/policy.toml
expect supervisor_in_its_slice bash -c 'systemctl show -p ControlGroup --value prims-supervisor.service | grep -qx /prims.slice/prims-supervisor.service'
expect mcp_runs_as_prims bash -c '[ "$(ps -o user= -p "$(systemctl show -p MainPID --value prims-mcp.service)")" = prims ]'

echo "== MCP smoke test (Python mcp SDK)"
state=$(mktemp)
smoke before "$state" || fails=$((fails+1))
expect session_quota_is_loop_mounted bash -c 'nsenter -t "$(systemctl show -p MainPID --value prims-supervisor.service)" -m findmnt -rn -t ext4 -o TARGET | grep -q "^/var/lib/prims/sessions/"'
expect audit_log_records_runs bash -c '[ "$(wc -l < /var/lib/prims/audit.log)" -ge 4 ]'
expect oom_in_audit_log grep -q '"oom"' /var/lib/prims/audit.log
expect audit_log_private bash -c '[ "$(stat -c %a /var/lib/prims/audit.log)" = 600 ]'
expect session_key_private bash -c '[ "$(stat -c %a /var/lib/prims/session.key)" = 600 ]'
expect env_is_a_read_only_image bash -c 'nsenter -t "$(systemctl show -p MainPID --value prims-supervisor.service)" -m findmnt -rn -t ext4 -o TARGET,OPTIONS | grep -q "^/var/lib/prims/envs/[0-9a-f]* ro,"'

echo "== systemctl restart prims-supervisor with the session alive"
expect supervisor_restarts systemctl restart prims-supervisor.service
expect mcp_health_after_restart wait_health
smoke after "$state" || fails=$((fails+1))

echo "== KillMode=control-group: systemctl stop signals every process of the unit, jails included"
mkdir -p /etc/systemd/system/prims-supervisor.service.d
printf '[Service]\nKillMode=control-group\n' > /etc/systemd/system/prims-supervisor.service.d/killmode.conf
systemctl daemon-reload
expect killmode_is_control_group bash -c '[ "$(systemctl show -p KillMode --value prims-supervisor.service)" = control-group ]'
expect supervisor_restarts_under_control_group systemctl restart prims-supervisor.service
expect mcp_health_after_control_group_restart wait_health
smoke after "$state" || fails=$((fails+1))
rm -r /etc/systemd/system/prims-supervisor.service.d
systemctl daemon-reload

echo "== upgrade: dpkg -i again while both services run"
before=$(systemctl show -p MainPID --value prims-supervisor.service)
expect upgrade_installs dpkg -i "$here"/prims_*.deb
expect upgrade_keeps_the_edited_policy grep -qx 'default_packages = \[\]' /etc/prims/policy.toml
expect upgrade_keeps_no_kernel_layer grep -qx 'ipython_packages = \[\]' /etc/prims/policy.toml
expect upgrade_restarted_the_supervisor bash -c "[ \"\$(systemctl show -p MainPID --value prims-supervisor.service)\" != '$before' ] && systemctl is-active -q prims-supervisor.service prims-mcp.service"
expect mcp_health_after_upgrade wait_health
smoke after "$state" || fails=$((fails+1))

echo "== allowlist mode: a listed server on this host's private address, through the egress proxy"
ip link add prims-d0 type dummy && ip addr add 10.99.0.1/24 dev prims-d0 && ip link set prims-d0 up
mkdir -p /tmp/www && echo hello-egress > /tmp/www/hello.txt
(cd /tmp/www && exec python3 -m http.server 8765 --bind 10.99.0.1 >/dev/null 2>&1) &
www=$!
# Only the [network] section's keys: [egress] has an `allow = []` too.
python3 - <<'PY'
p = "/etc/prims/policy.toml"
head, sep, rest = open(p).read().partition("\n[network]\n")
body, nxt, tail = rest.partition("\n[")
body = body.replace('mode = "none"', 'mode = "allowlist"', 1)
body = body.replace("allow = []", 'allow = ["10.99.0.1:8765"]', 1)
open(p, "w").write(head + sep + body + nxt + tail)
PY
expect egress_policy_check prims policy check /etc/prims/policy.toml
expect egress_policy_reload systemctl reload prims-supervisor.service
sleep 1
smoke egress "http://10.99.0.1:8765/hello.txt" || fails=$((fails+1))
# The proxy runs as prims-egress with root's real uid (unnamable in its user
# namespace); its launcher, outside, is root.
expect egress_proxy_ids bash -c 'pgrep -f "prims egress-proxy" | while read -r p; do ps -o ruser=,euser= -p "$p"; done | sort | tr -s " " | grep -qx " *root prims-egress"'
expect egress_proxy_out_of_reach_of_its_own_account bash -c '! setpriv --reuid=prims-egress --regid=prims-egress --clear-groups kill -STOP "$(pgrep -u prims-egress -f "prims egress-proxy")"'
kill "$www"

echo "== systemctl status"
systemctl --no-pager status prims-supervisor.service prims-mcp.service | sed 's/^/   /' | head -40
for u in prims-supervisor.service prims-mcp.service; do
  expect "status_${u%.service}_active_running" bash -c "[ \"\$(systemctl show -p ActiveState,SubState --value $u | xargs)\" = 'active running' ]"
done
expect no_failed_units bash -c '[ -z "$(systemctl list-units --failed --plain --no-legend)" ]'
expect no_job_cgroups_left bash -c '[ -z "$(find /sys/fs/cgroup/prims.slice -type d -name "run-*")" ]'
expect mcp_never_restarted bash -c '[ "$(systemctl show -p NRestarts --value prims-mcp.service)" = 0 ]'
errors=$(journalctl -b -u prims-supervisor.service -u prims-mcp.service -p err --no-pager -q)
if [ -z "$errors" ]; then pass journal_has_no_errors; else fail journal_has_no_errors "$errors"; fi

echo "== systemctl reload with a bad policy, then a good one"
cp /etc/prims/policy.toml /root/policy.good
sed -i 's/^memory = .*/memory = "12XB"/' /etc/prims/policy.toml
since=$(date '+%Y-%m-%d %H:%M:%S')
expect reload_bad_policy_keeps_running bash -c 'systemctl reload prims-supervisor.service && sleep 1 && systemctl is-active -q prims-supervisor.service'
expect reload_bad_policy_logged bash -c "journalctl -u prims-supervisor.service -p err --since '$since' | grep -q 12XB"
cp /root/policy.good /etc/prims/policy.toml
expect reload_good_policy systemctl reload prims-supervisor.service

echo "== stop and purge"
expect services_stop systemctl disable --now prims-mcp.service prims-supervisor.service
expect deb_purges dpkg --purge prims
expect purge_removed_state bash -c '[ ! -e /var/lib/prims ]'

echo "$fails failed"
exit $((fails > 0))

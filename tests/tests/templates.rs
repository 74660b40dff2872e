//! Fork templates through a real supervisor: interpreters forked from an
//! environment's template are confined as cold ones are, share nothing
//! session-specific, and a template's death or a child's fork bomb costs
//! no other session anything.

use prims_protocol::client::Client;
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::forked::{
    clean, forked_session, forked_session_with, numpy_templates_daemon, template_pythons,
    templates_policy as policy, with_numpy, FORKED,
};
use prims_tests::live::*;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

/// Runs `code` and returns its stdout, failing on anything on stderr.
async fn out(c: &Client, s: &str, code: &str) -> String {
    clean(&run(c, s, code).await)
}

/// What a forked child can see of, and do to, its template, its siblings
/// and the host: its own pid namespace and nothing else, no way to make a
/// namespace, mount or trace, and the template's procfs out of reach (an
/// empty tmpfs over it, a mode-0 directory, and Landlock but for listing).
const REACH: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = getattr(libc, name)(*args)
    return 'ok' if r == 0 else errno.errorcode[ctypes.get_errno()]
print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
print('me', os.getpid(), os.getuid(), os.getgid())
alive = []
for pid in range(3, 1 << 16):
    try:
        os.kill(pid, 0)
        alive.append(pid)
    except ProcessLookupError:
        pass
print('signalable', alive)
print('ptrace', call('ptrace', 16, 1, 0, 0))
print('unshare', call('unshare', 0x10000000))
print('setns', call('setns', 0, 0))
print('mount', call('mount', b'none', b'/tmp', b'tmpfs', 0, None))
try:
    os.listdir('/.t')
    print('/.t', 'listed')
except OSError as e:
    print('/.t', errno.errorcode[e.errno])
# The template's procfs lies under /.t; an empty read-only tmpfs covers it.
top = [l.split() for l in open('/proc/self/mountinfo') if l.split()[4] == '/.t'][-1]
print('/.t covered by', top[top.index('-') + 1], top[5].split(',')[0])
# Its own /dev/shm, over nothing of the template's (which has none).
print('/dev/shm mounts', [l.split()[l.split().index('-') + 1] for l in open('/proc/self/mountinfo') if l.split()[4] == '/dev/shm'])
print([l.split()[::2] for l in open('/proc/self/uid_map')])
print([l.split()[::2] for l in open('/proc/self/gid_map')])
open('/workspace/mine', 'w').close()
print(sorted({l.split(':', 2)[2].strip() for l in open('/proc/self/cgroup')}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn templates_a_forked_interpreter_is_confined_as_a_cold_one() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let a = forked_session(&d, &c).await;
    assert_eq!(out(&c, &a, CONFINEMENT).await, CONFINED);
    let host_uid = std::fs::metadata(d.workspace(&a)).unwrap().uid();
    assert_eq!(
        out(&c, &a, REACH).await,
        "pids [1, 2]\n\
             me 2 1000 1000\n\
             signalable []\n\
             ptrace EPERM\n\
             unshare EPERM\n\
             setns EPERM\n\
             mount EPERM\n\
             /.t EACCES\n\
             /.t covered by tmpfs ro\n\
             /dev/shm mounts ['tmpfs']\n\
             [['1000', '1']]\n\
             [['1000', '1']]\n\
             ['/']\n"
    );
    // Its one id is the session's own on the host.
    let made = std::fs::metadata(d.workspace(&a).join("mine")).unwrap();
    assert_eq!((made.uid(), made.gid()), (host_uid, host_uid));
    // State stays, as in any live interpreter.
    out(&c, &a, "x = 41").await;
    assert_eq!(out(&c, &a, "print(x + 1)").await, "42\n");

    // A sibling, forked from the same template, is another session's.
    let b = forked_session(&d, &c).await;
    out(
        &c,
        &b,
        "open('output/b-secret.txt', 'w').write('B')\nopen('/dev/shm/b-secret.txt', 'w').write('B')",
    )
    .await;
    let look = "import os\nhits = []\n\
                for top in ('/workspace', '/tmp', '/dev', '/etc'):\n\
                \x20   for root, dirs, files in os.walk(top):\n\
                \x20       hits += [f for f in files if f == 'b-secret.txt']\n\
                print(hits)";
    assert_eq!(out(&c, &a, look).await, "[]\n");
    let b_uid = std::fs::metadata(d.workspace(&b)).unwrap().uid();
    assert_ne!(host_uid, b_uid);
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_siblings_draw_their_own_random_numbers() {
    let d = numpy_templates_daemon();
    let c = d.client().await;
    let draw = "import sys\nhad = 'numpy.random' in sys.modules\nimport random, numpy\n\
                print(had, random.random(), numpy.random.random())";
    let mut seen = Vec::new();
    for _ in 0..2 {
        let s = forked_session_with(&d, &c, with_numpy).await;
        let r = send(&c, with_numpy(&s)).await;
        assert_eq!(stderr(&r), "");
        let mut req = with_numpy(&s);
        req.code = draw.into();
        let line = stdout(&send(&c, req).await);
        assert!(line.starts_with("True "), "{line}");
        seen.push(line);
    }
    assert_ne!(seen[0], seen[1], "siblings drew the same numbers");
    let halves = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (a, b) = (halves(&seen[0]), halves(&seen[1]));
    assert_ne!(a[1], b[1], "random: {a:?} {b:?}");
    assert_ne!(a[2], b[2], "numpy: {a:?} {b:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_a_forked_session_starts_at_cell_one_with_its_own_history() {
    // The template ran a warm-up cell; no child may see it.
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let s = forked_session(&d, &c).await;
    let code = "ip = get_ipython()\n\
                print(ip.execution_count, len(In), In[1] == _i1 == _i, 'pass' in In, '_1' in globals())\n\
                print(repr(_i1))";
    let got = out(&c, &s, code).await;
    assert_eq!(got, format!("3 3 True False False\n{FORKED:?}\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_a_template_killed_during_a_burst_loses_no_session() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    forked_session(&d, &c).await;
    let before = template_pythons(&d);
    assert_eq!(before.len(), 1, "{before:?}");
    let burst: Vec<_> = (0..6)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let s = c.open_session(None).await.unwrap().session_id;
                out(&c, &s, &format!("print({i} * 2)")).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(30)).await;
    // SAFETY: kill with a pid and a signal number.
    assert_eq!(unsafe { libc::kill(before[0], libc::SIGKILL) }, 0);
    for (i, t) in burst.into_iter().enumerate() {
        assert_eq!(t.await.unwrap(), format!("{}\n", i * 2));
    }
    // A new template takes the dead one's place; its children work.
    let s = forked_session(&d, &c).await;
    assert_eq!(out(&c, &s, "print('after')").await, "after\n");
    let after = template_pythons(&d);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before);
}

/// A template imports at idle weight, as a pool refill does, and forks at
/// normal weight; a fresh run's child competes at batch weight until a
/// call of the session's own uses it.
#[tokio::test(flavor = "multi_thread")]
async fn templates_a_fresh_child_runs_at_batch_weight() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let s = forked_session(&d, &c).await;
    let shares = d.job_cpu_shares();
    // The template's job and the session's, both at the default weight.
    assert!(shares.len() >= 2, "{shares:?}");
    assert!(shares.values().all(|v| v == "1024"), "{shares:?}");
    let hold = format!(
        "{FORKED}\nimport time\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.02)"
    );
    let call = tokio::spawn({
        let (c, s) = (c.clone(), s.clone());
        async move { send(&c, fresh(&s, &hold)).await }
    });
    assert_eq!(d.wait_for_batch_jobs(1), 1, "{:?}", d.job_cpu_shares());
    std::fs::write(d.workspace(&s).join("go"), "").unwrap();
    let r = call.await.unwrap();
    assert_eq!(stdout(&r), "True\n", "forked: {r:?}");
    assert_eq!(out(&c, &s, "print(2)").await, "2\n");
    let shares = d.job_cpu_shares();
    assert!(shares.values().all(|v| v == "1024"), "{shares:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_a_fork_bomb_stays_within_its_own_pids_max() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let bomber = forked_session(&d, &c).await;
    let bomb = "import os, time\n\
                n = 0\n\
                try:\n\
                \x20   while n < 10000:\n\
                \x20       if os.fork() == 0:\n\
                \x20           time.sleep(60)\n\
                \x20           os._exit(0)\n\
                \x20       n += 1\n\
                except OSError as e:\n\
                \x20   print('stopped', e.errno == 11, 0 < n < 64)";
    assert_eq!(out(&c, &bomber, bomb).await, "stopped True True\n");
    // The template and the other children are untouched: a new session is
    // still forked, and works.
    let other = forked_session(&d, &c).await;
    assert_eq!(out(&c, &other, "print('fine')").await, "fine\n");
    assert_eq!(template_pythons(&d).len(), 1);
}

/// The kernel counts every child's processes against the template's uid as
/// well, up to the process limit the template had: with `limits.pids` of
/// 16, a template holding that limit would refuse its ninth live child.
#[tokio::test(flavor = "multi_thread")]
async fn templates_children_share_no_process_budget() {
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}fork_templates = true\n"),
        "[limits]\npids = 16\n",
    ));
    let c = d.client().await;
    forked_session(&d, &c).await;
    for i in 0..12 {
        let s = c.open_session(None).await.unwrap().session_id;
        assert_eq!(out(&c, &s, FORKED).await, "True\n", "child {i}");
    }
}

/// `(size, in huge pages)` of `pid`'s `[heap]` mapping, in KiB: the pages
/// of transparent huge pages, mapped whole or split into 4 KiB entries
/// (`/proc/kpageflags` KPF_THP of each present page's frame).
fn heap_kib(pid: i32) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    const KPF_THP: u64 = 1 << 22;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let range = maps
        .lines()
        .find(|l| l.ends_with("[heap]"))?
        .split_whitespace()
        .next()?;
    let (a, b) = range.split_once('-')?;
    let (a, b) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).ok()?;
    let flags = std::fs::File::open("/proc/kpageflags").ok()?;
    let mut entries = vec![0u8; ((b - a) / 4096 * 8) as usize];
    pagemap.read_exact_at(&mut entries, a / 4096 * 8).ok()?;
    let mut huge = 0;
    for e in entries.chunks_exact(8) {
        let e = u64::from_ne_bytes(e.try_into().ok()?);
        let mut f = [0u8; 8];
        if e >> 63 == 1
            && flags
                .read_exact_at(&mut f, (e & ((1 << 55) - 1)) * 8)
                .is_ok()
        {
            huge += u64::from(u64::from_ne_bytes(f) & KPF_THP != 0) * 4;
        }
    }
    Some(((b - a) / 1024, huge))
}

/// A template's objects live in malloc's heap, backed by 2 MiB pages, so
/// that a fork copies (and an exit unmaps) their page-table entries a
/// folio at a time; its children run with python's own allocator default
/// for their subprocesses, and without the `-c` path entry.
#[tokio::test(flavor = "multi_thread")]
async fn templates_a_template_heap_is_in_huge_pages_and_its_children_keep_python_defaults() {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .expect("this test needs a kernel with transparent huge pages");
    let d = numpy_templates_daemon();
    let c = d.client().await;
    let s = forked_session_with(&d, &c, with_numpy).await;
    let heaps: Vec<_> = template_pythons(&d)
        .into_iter()
        .filter_map(heap_kib)
        .collect();
    let big: Vec<_> = heaps.iter().filter(|(size, _)| *size >= 8 * 1024).collect();
    assert!(!big.is_empty(), "no template with numpy's heap: {heaps:?}");
    for (size, huge) in big {
        assert!(
            *huge >= size / 2,
            "a {size} KiB template heap holds {huge} KiB of huge pages (THP: {thp})"
        );
    }
    let mut req = with_numpy(&s);
    req.code = "import os, sys\nprint(os.environ.get('PYTHONMALLOC'), sys.path.count(''))".into();
    assert_eq!(clean(&send(&c, req).await), "None 0\n");
}

/// The server is ready once what a new session's first call needs is up,
/// the default environment's template among it: that call then forks, and
/// nothing has started cold.
#[tokio::test(flavor = "multi_thread")]
async fn templates_the_server_is_ready_once_its_default_template_is_up() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let ready = wait_for_stats(&c, "the server ready", |s| s.ready).await;
    assert!(
        ready.base_env_ready && ready.templates_up == 1,
        "ready before its template: {ready:?}"
    );
    assert!(
        ready.waiting_for.is_empty() && ready.degraded.is_empty(),
        "{ready:?}"
    );
    let s = c.open_session(None).await.unwrap().session_id;
    assert_eq!(out(&c, &s, FORKED).await, "True\n");
    let after = c.stats().await.unwrap();
    assert_eq!(
        (after.starts_forked, after.starts_cold),
        (1, 0),
        "{after:?}"
    );
}

/// A call that arrives before the server is ready (here the IPython layer
/// is still being built from PyPI) says that it waits for that build, as
/// progress, and then runs; the server said what it was waiting for.
#[tokio::test(flavor = "multi_thread")]
async fn templates_a_call_before_ready_says_it_waits_for_the_build() {
    let d = Daemon::start_with_python(
        &live_policy(NO_POOL, ""),
        "ipython_packages = [\"ipython\"]\n",
    );
    let c = d.client().await;
    let before = c.stats().await.unwrap();
    assert!(
        !before.ready && !before.waiting_for.is_empty(),
        "the IPython layer built from PyPI before the socket answered: {before:?}"
    );
    let s = c.open_session(None).await.unwrap().session_id;
    let mut building = Vec::new();
    let reply = c
        .run(run_req(&s, "print(1)"), |ev| {
            if let prims_protocol::wire::Event::Building { message } = ev {
                building.push(message.clone());
            }
        })
        .await
        .unwrap_or_else(|e| panic!("the call before ready failed: {e}\n{}", d.log()));
    assert_eq!(stdout(&reply), "1\n", "{reply:?}");
    assert!(
        building
            .iter()
            .any(|m| m.contains("waiting for the same environment, already being built")),
        "no progress said the call waits for the build: {building:?}"
    );
    let after = wait_for_stats(&c, "the server ready", |s| s.ready).await;
    assert!(after.degraded.is_empty(), "{after:?}");
}

/// A session whose interpreter started cold, because its environment's
/// template was not up yet (another environment's starts on first use),
/// gets a forked one for a later `fresh: true` call once it is.
#[tokio::test(flavor = "multi_thread")]
async fn templates_a_session_that_started_cold_forks_its_later_fresh_interpreters() {
    let d = numpy_templates_daemon();
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let ask = |fresh| prims_protocol::wire::RunRequest {
        code: FORKED.into(),
        fresh,
        ..with_numpy(&s)
    };
    let first = send(&c, ask(false)).await;
    assert_eq!(
        clean(&first),
        "False\n",
        "the numpy template starts on first use"
    );
    let deadline = std::time::Instant::now() + HANG_GUARD * 3;
    loop {
        if clean(&send(&c, ask(true)).await) == "True\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no forked interpreter for the session's fresh calls:\n{}",
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = c.stats().await.unwrap();
    assert!(
        stats.starts_cold >= 1 && stats.starts_forked >= 1,
        "{stats:?}"
    );
}

/// With the switch off every start is cold, and counted as such.
#[tokio::test(flavor = "multi_thread")]
async fn templates_starts_are_counted_with_the_switch_off_too() {
    let d = Daemon::start(&live_policy(COLD, ""));
    let c = d.client().await;
    let ready = wait_for_stats(&c, "the server ready", |s| s.ready).await;
    assert_eq!(ready.templates_up, 0, "{ready:?}");
    let s = c.open_session(None).await.unwrap().session_id;
    assert_eq!(out(&c, &s, FORKED).await, "False\n");
    send(&c, fresh(&s, "pass")).await;
    let stats = c.stats().await.unwrap();
    assert_eq!(
        (
            stats.starts_cold,
            stats.starts_forked,
            stats.starts_in_place
        ),
        (2, 0, 0),
        "{stats:?}"
    );
}

/// Siblings of one template share its string-hash secret and its address
/// layout, so a template is replaced after `template_max_children`
/// children (and `template_max_age`): later sessions hash otherwise. The
/// old one forks until its successor is up, so no start goes cold.
#[tokio::test(flavor = "multi_thread")]
async fn templates_a_template_is_replaced_after_its_children_and_no_start_goes_cold() {
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}fork_templates = true\ntemplate_max_children = 2\n"),
        "",
    ));
    let c = d.client().await;
    let secret = "import sys\nprint(hash('prims'), id(sys))";
    let first = forked_session(&d, &c).await;
    let old = out(&c, &first, secret).await;
    // Starts before the first template was up went cold; none after.
    let cold = c.stats().await.unwrap().starts_cold;
    let second = forked_session(&d, &c).await;
    assert_eq!(
        out(&c, &second, secret).await,
        old,
        "siblings of one template"
    );
    let deadline = std::time::Instant::now() + HANG_GUARD * 5;
    let mut seen = vec![old.clone()];
    loop {
        let s = forked_session(&d, &c).await;
        let now = out(&c, &s, secret).await;
        seen.push(now.clone());
        if now.split_whitespace().next() != old.split_whitespace().next() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no successor came up: {seen:?}\n{}",
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = c.stats().await.unwrap();
    assert_eq!(stats.starts_cold, cold, "{stats:?}");
    assert_eq!(stats.templates_up, 1, "the old one went: {stats:?}");
}

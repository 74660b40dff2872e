//! Policy text for test supervisors: what a test gives, with the keys it
//! leaves out taken from the tests' defaults.

use toml::Table;

/// Keys every test supervisor gets unless its test sets them: session
/// workspaces of 256 MiB, since each reserves its whole quota on disk and
/// a build host runs several supervisors, each with its warm pool, at once.
pub const TEST_DEFAULTS: &str = "[sessions]\ndisk_quota = \"256MiB\"\n";

/// `extra` with every key of `defaults` it does not set. Text that is not
/// TOML (a test of the policy's errors) is returned as it is.
pub fn with_defaults(extra: &str, defaults: &str) -> String {
    let (Ok(mut given), Ok(defaults)) = (extra.parse::<Table>(), defaults.parse::<Table>()) else {
        return extra.to_string();
    };
    for (section, keys) in defaults {
        match (given.get_mut(&section), keys) {
            (Some(toml::Value::Table(have)), toml::Value::Table(keys)) => {
                for (k, v) in keys {
                    have.entry(k).or_insert(v);
                }
            }
            (Some(_), _) => {}
            (None, keys) => {
                given.insert(section, keys);
            }
        }
    }
    given.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_key_wins_and_missing_ones_are_added() {
        let merged = with_defaults(
            "[sessions]\nmax_sessions = 3\n[limits]\nwall_time = \"5s\"\n",
            "[sessions]\ndisk_quota = \"256MiB\"\nmax_sessions = 9\n[interpreters]\npool_size = 0\n",
        );
        let t: Table = merged.parse().unwrap();
        assert_eq!(t["sessions"]["max_sessions"].as_integer(), Some(3));
        assert_eq!(t["sessions"]["disk_quota"].as_str(), Some("256MiB"));
        assert_eq!(t["limits"]["wall_time"].as_str(), Some("5s"));
        assert_eq!(t["interpreters"]["pool_size"].as_integer(), Some(0));
    }

    #[test]
    fn text_that_is_not_toml_is_left_alone() {
        assert_eq!(with_defaults("[sessions\n", TEST_DEFAULTS), "[sessions\n");
    }
}

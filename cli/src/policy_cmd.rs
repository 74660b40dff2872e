//! `prims policy check FILE`.

use prims_policy::Policy;
use std::path::Path;

pub fn check(file: &Path) -> i32 {
    match Policy::load(file) {
        Ok(policy) => {
            for w in policy.warnings() {
                eprintln!("warning: {w}");
            }
            print!("{}", policy.to_toml_string());
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

//! The program the jail's python process execs: its argv and its whole
//! environment. Nothing of the host's environment is passed on.

use crate::error::JailError;
use prims_protocol::jail::JobSpec;
use std::ffi::CString;

/// The venv's python, as the jail sees it: the program unless the spec
/// names another one.
pub use prims_protocol::jail::VENV_PYTHON as PYTHON;

/// The environment every program starts from; a spec entry of the same key
/// replaces an entry here.
const BASE_ENV: [&str; 6] = [
    "PATH=/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME=/tmp",
    "LANG=C.UTF-8",
    "TMPDIR=/tmp",
    "VIRTUAL_ENV=/venv",
    "PYTHONUNBUFFERED=1",
];

/// What `execve` gets. `argv[0]` is also the path executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
}

pub fn program(spec: &JobSpec) -> Result<Program, JailError> {
    Ok(Program {
        argv: argv(spec)?,
        envp: envp(spec),
    })
}

/// The spec's argv when it has one, else `python -I -u -c code`.
fn argv(spec: &JobSpec) -> Result<Vec<CString>, JailError> {
    if !spec.argv.is_empty() {
        return spec
            .argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| JailError::Spec("argv contains a NUL byte".into()));
    }
    let code = CString::new(spec.code.as_bytes())
        .map_err(|_| JailError::Spec("code contains a NUL byte".into()))?;
    let mut argv: Vec<CString> = [PYTHON, "-I", "-u", "-c"]
        .iter()
        .filter_map(|s| CString::new(*s).ok())
        .collect();
    argv.push(code);
    Ok(argv)
}

/// The base entries the spec does not replace, then the spec's entries in
/// its order. An entry holding a NUL byte cannot be passed and is left out.
fn envp(spec: &JobSpec) -> Vec<CString> {
    let key = |e: &str| e.split('=').next().unwrap_or("").to_string();
    let extra: Vec<&str> = spec.env.iter().map(String::as_str).collect();
    BASE_ENV
        .iter()
        .filter(|b| !extra.iter().any(|e| key(e) == key(b)))
        .chain(extra.iter())
        .filter_map(|s| CString::new(*s).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::spec;

    fn strings(v: &[CString]) -> Vec<&str> {
        v.iter().map(|c| c.to_str().unwrap()).collect()
    }

    #[test]
    fn python_runs_the_code_isolated_and_unbuffered() {
        let p = program(&spec()).unwrap();
        assert_eq!(
            strings(&p.argv),
            ["/venv/bin/python", "-I", "-u", "-c", "print('hi')"]
        );
    }

    #[test]
    fn the_environment_is_the_base_and_nothing_from_the_host() {
        let p = program(&spec()).unwrap();
        // Exactly the base, though this test process has its own PATH, HOME
        // and cargo's variables.
        assert_eq!(strings(&p.envp), BASE_ENV);
    }

    #[test]
    fn spec_entries_replace_base_keys_and_follow_the_base() {
        let s = JobSpec {
            env: vec![
                "UV_CACHE_DIR=/cache".into(),
                "PATH=/opt/uv:/usr/bin".into(),
                "HOME=/tmp/home".into(),
            ],
            ..spec()
        };
        assert_eq!(
            strings(&program(&s).unwrap().envp),
            [
                "LANG=C.UTF-8",
                "TMPDIR=/tmp",
                "VIRTUAL_ENV=/venv",
                "PYTHONUNBUFFERED=1",
                "UV_CACHE_DIR=/cache",
                "PATH=/opt/uv:/usr/bin",
                "HOME=/tmp/home",
            ]
        );
    }

    #[test]
    fn an_entry_is_keyed_by_what_precedes_its_first_equals_sign() {
        let s = JobSpec {
            env: vec!["LANG".into(), "X=a=b".into(), "PATHX=1".into()],
            ..spec()
        };
        let envp = program(&s).unwrap().envp;
        let envp = strings(&envp);
        assert!(!envp.contains(&"LANG=C.UTF-8"), "{envp:?}");
        assert!(envp.contains(&"PATH=/venv/bin:/usr/local/bin:/usr/bin:/bin"));
        assert!(envp.ends_with(&["LANG", "X=a=b", "PATHX=1"]), "{envp:?}");
    }

    #[test]
    fn an_entry_with_a_nul_byte_is_left_out() {
        let s = JobSpec {
            env: vec!["A=1\0B=2".into(), "C=3".into()],
            ..spec()
        };
        let envp = program(&s).unwrap().envp;
        assert_eq!(strings(&envp).last(), Some(&"C=3"));
        assert_eq!(envp.len(), BASE_ENV.len() + 1);
    }

    #[test]
    fn a_given_argv_replaces_python_and_the_code() {
        let s = JobSpec {
            argv: vec!["/opt/uv/uv".into(), "pip".into(), "install".into()],
            code: "ignored".into(),
            ..spec()
        };
        let p = program(&s).unwrap();
        assert_eq!(strings(&p.argv), ["/opt/uv/uv", "pip", "install"]);
        assert_eq!(strings(&p.envp), BASE_ENV);
    }

    #[test]
    fn nul_bytes_in_argv_or_code_are_refused() {
        let s = JobSpec {
            argv: vec!["/opt/uv/uv".into(), "a\0b".into()],
            ..spec()
        };
        assert!(matches!(program(&s), Err(JailError::Spec(m)) if m == "argv contains a NUL byte"));
        let s = JobSpec {
            code: "x\0".into(),
            ..spec()
        };
        assert!(matches!(program(&s), Err(JailError::Spec(m)) if m == "code contains a NUL byte"));
    }
}

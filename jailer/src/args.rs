//! The jailer's command line: which inherited fds carry what.

use std::os::fd::RawFd;

pub const USAGE: &str =
    "usage: prims-jailer --spec-fd N --outcome-fd M [--proxy-fd P] [--channel-fd C] [--adopt-fd A] (fds > 2 and distinct)";

/// The inherited fds named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fds {
    /// The job spec, read once.
    pub spec: RawFd,
    /// Where the outcome record is written.
    pub outcome: RawFd,
    /// Proxy mode: the Unix socket the jail's listener is sent on.
    pub proxy: Option<RawFd>,
    /// A socket passed to python, and only to python, as its fd 3.
    pub channel: Option<RawFd>,
    /// The socket to a fork template's child, which the jail adopts.
    pub adopt: Option<RawFd>,
}

impl Fds {
    /// Every fd named, in a fixed order.
    pub fn all(&self) -> Vec<RawFd> {
        let mut fds = vec![self.spec, self.outcome];
        fds.extend(self.proxy);
        fds.extend(self.channel);
        fds.extend(self.adopt);
        fds
    }
}

/// Parse the arguments after the program name. Every fd must be above 2
/// (0-2 are python's stdio) and no fd may be named twice.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Fds, String> {
    let mut spec = None;
    let mut outcome = None;
    let mut proxy = None;
    let mut channel = None;
    let mut adopt = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let val = it
            .next()
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|v| *v > 2);
        match a.as_str() {
            "--spec-fd" => spec = val,
            "--outcome-fd" => outcome = val,
            "--proxy-fd" => proxy = Some(val.ok_or("--proxy-fd takes an fd above 2")?),
            "--channel-fd" => channel = Some(val.ok_or("--channel-fd takes an fd above 2")?),
            "--adopt-fd" => adopt = Some(val.ok_or("--adopt-fd takes an fd above 2")?),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    let (Some(spec), Some(outcome)) = (spec, outcome) else {
        return Err(USAGE.into());
    };
    let fds = Fds {
        spec,
        outcome,
        proxy,
        channel,
        adopt,
    };
    let mut all = fds.all();
    all.sort_unstable();
    all.dedup();
    if all.len() != fds.all().len() {
        return Err(USAGE.into());
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Result<Fds, String> {
        parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn spec_and_outcome_alone() {
        assert_eq!(
            parsed(&["--spec-fd", "3", "--outcome-fd", "4"]).unwrap(),
            Fds {
                spec: 3,
                outcome: 4,
                proxy: None,
                channel: None,
                adopt: None
            }
        );
    }

    #[test]
    fn proxy_and_channel_together_in_any_order() {
        let fds = parsed(&[
            "--channel-fd",
            "6",
            "--spec-fd",
            "3",
            "--proxy-fd",
            "5",
            "--outcome-fd",
            "4",
        ])
        .unwrap();
        assert_eq!((fds.proxy, fds.channel), (Some(5), Some(6)));
        assert_eq!(fds.all(), [3, 4, 5, 6]);
    }

    #[test]
    fn the_channel_may_take_any_number_above_2() {
        for (spec, outcome, channel) in [("4", "5", "3"), ("3", "5", "4"), ("3", "4", "1000")] {
            let fds = parsed(&[
                "--spec-fd",
                spec,
                "--outcome-fd",
                outcome,
                "--channel-fd",
                channel,
            ])
            .unwrap();
            assert_eq!(fds.channel, channel.parse().ok());
        }
    }

    #[test]
    fn a_channel_fd_of_stdio_or_garbage_is_refused() {
        for bad in ["0", "1", "2", "-1", "x", ""] {
            let e =
                parsed(&["--spec-fd", "3", "--outcome-fd", "4", "--channel-fd", bad]).unwrap_err();
            assert_eq!(e, "--channel-fd takes an fd above 2", "{bad:?}");
        }
        let e = parsed(&["--spec-fd", "3", "--outcome-fd", "4", "--channel-fd"]).unwrap_err();
        assert_eq!(e, "--channel-fd takes an fd above 2");
    }

    #[test]
    fn an_fd_named_twice_is_refused() {
        for args in [
            &["--spec-fd", "3", "--outcome-fd", "3"][..],
            &["--spec-fd", "3", "--outcome-fd", "4", "--channel-fd", "3"],
            &["--spec-fd", "3", "--outcome-fd", "4", "--channel-fd", "4"],
            &[
                "--spec-fd",
                "3",
                "--outcome-fd",
                "4",
                "--proxy-fd",
                "5",
                "--channel-fd",
                "5",
            ],
            &["--spec-fd", "3", "--outcome-fd", "4", "--proxy-fd", "3"],
        ] {
            assert_eq!(parsed(args).unwrap_err(), USAGE, "{args:?}");
        }
    }

    #[test]
    fn spec_and_outcome_are_required() {
        for args in [
            &[][..],
            &["--spec-fd", "3"],
            &["--outcome-fd", "4", "--channel-fd", "5"],
            &["--spec-fd", "2", "--outcome-fd", "4"],
        ] {
            assert_eq!(parsed(args).unwrap_err(), USAGE, "{args:?}");
        }
    }

    #[test]
    fn unknown_arguments_are_named() {
        assert_eq!(
            parsed(&["--spec-fd", "3", "--outcome-fd", "4", "--chanel-fd", "5"]).unwrap_err(),
            "unknown argument \"--chanel-fd\""
        );
    }
}

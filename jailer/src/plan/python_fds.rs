//! Which fds python inherits: 0-2 (stdio) always, and with a channel
//! (`--channel-fd`) that socket as fd 3, blocking whatever the caller made
//! it. Every other fd the init holds is made close-on-exec, so nothing else
//! crosses the exec.
//!
//! The init's own fds have whatever numbers they were given, so the channel
//! may already be 3, or 3 may hold the report pipe the init still needs to
//! tell of a failed exec: that pipe moves off 3 before the channel lands
//! there.

use std::os::fd::RawFd;

/// python's fd 3.
pub const CHANNEL_FD: RawFd = 3;

/// How the channel becomes fd 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelOnto3 {
    /// It is 3 already: only its close-on-exec flag is cleared.
    InPlace,
    /// `dup2(from, 3)`, which also clears the flag on 3.
    Dup2 { from: RawFd },
}

/// The steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonFds {
    /// Move the report pipe to a free fd above 3 first.
    pub move_report: bool,
    pub channel: Option<ChannelOnto3>,
    /// `close_range(cloexec_from, ~0, CLOSE_RANGE_CLOEXEC)` last.
    pub cloexec_from: u32,
}

pub fn python_fds(channel: Option<RawFd>, report: RawFd) -> PythonFds {
    match channel {
        None => PythonFds {
            move_report: false,
            channel: None,
            cloexec_from: CHANNEL_FD as u32,
        },
        Some(CHANNEL_FD) => PythonFds {
            move_report: false,
            channel: Some(ChannelOnto3::InPlace),
            cloexec_from: CHANNEL_FD as u32 + 1,
        },
        Some(from) => PythonFds {
            move_report: report == CHANNEL_FD,
            channel: Some(ChannelOnto3::Dup2 { from }),
            cloexec_from: CHANNEL_FD as u32 + 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_channel_everything_from_3_is_close_on_exec() {
        for report in [3, 4, 9] {
            assert_eq!(
                python_fds(None, report),
                PythonFds {
                    move_report: false,
                    channel: None,
                    cloexec_from: 3
                }
            );
        }
    }

    #[test]
    fn a_channel_on_3_stays_and_only_loses_close_on_exec() {
        assert_eq!(
            python_fds(Some(3), 4),
            PythonFds {
                move_report: false,
                channel: Some(ChannelOnto3::InPlace),
                cloexec_from: 4
            }
        );
    }

    #[test]
    fn a_channel_elsewhere_is_duplicated_onto_3() {
        for (channel, report) in [(4, 5), (4, 9), (9, 4), (1000, 7)] {
            assert_eq!(
                python_fds(Some(channel), report),
                PythonFds {
                    move_report: false,
                    channel: Some(ChannelOnto3::Dup2 { from: channel }),
                    cloexec_from: 4
                },
                "channel {channel}, report {report}"
            );
        }
    }

    #[test]
    fn a_report_pipe_on_3_moves_before_the_channel_lands_there() {
        for channel in [4, 5, 12] {
            let plan = python_fds(Some(channel), 3);
            assert!(plan.move_report, "channel {channel}");
            assert_eq!(plan.channel, Some(ChannelOnto3::Dup2 { from: channel }));
        }
        // No channel: 3 keeps the report pipe, close-on-exec like the rest.
        assert!(!python_fds(None, 3).move_report);
    }
}

//! Which runs (and mounts) are under way in each session, and which ended
//! since a moment, so that a `subscriptions/listen` request misses no
//! change. rmcp acknowledges a listen before the server registers its
//! watches, and registering takes a stat through the supervisor: a run
//! that ends in between would otherwise go unreported, its change already
//! in the watch's baseline. Moments are generations: every ended run takes
//! the next one, and each HTTP request is stamped on arrival with the
//! latest ([`Arrived`]).

use std::collections::{HashMap, VecDeque};

/// Ended runs remembered; a stamp older than all of them catches up on
/// everything.
const RECENT: usize = 4096;

/// The generation when an HTTP request arrived (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrived(pub u64);

#[derive(Debug, Default)]
pub(crate) struct Activity {
    running: HashMap<String, usize>,
    ended: VecDeque<(u64, String)>,
    generation: u64,
}

/// What a watch registered after `arrived` owes its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Owed {
    /// A run ended since: notify now.
    pub(crate) now: bool,
    /// A run is under way: notify when it ends, whatever the stat says.
    pub(crate) at_end: bool,
}

impl Activity {
    pub(crate) fn stamp(&self) -> Arrived {
        Arrived(self.generation)
    }

    pub(crate) fn begin(&mut self, session: &str) {
        *self.running.entry(session.to_owned()).or_default() += 1;
    }

    /// A run of `session` reached its report.
    pub(crate) fn end(&mut self, session: &str) {
        self.generation += 1;
        self.ended.push_back((self.generation, session.to_owned()));
        if self.ended.len() > RECENT {
            self.ended.pop_front();
        }
    }

    /// The end of what [`Activity::begin`] started. A run that reports
    /// called [`Activity::end`] first, so it is always under way or ended;
    /// one that failed before its report is reported to no watch.
    pub(crate) fn finish(&mut self, session: &str) {
        if let Some(n) = self.running.get_mut(session) {
            *n -= 1;
            if *n == 0 {
                self.running.remove(session);
            }
        }
    }

    pub(crate) fn owed(&self, session: &str, arrived: Arrived) -> Owed {
        // Generations are consecutive: a gap before the oldest one kept
        // means ends after `arrived` were forgotten.
        let forgotten = self.ended.front().is_some_and(|(g, _)| *g > arrived.0 + 1);
        let ended = (self.ended.iter().rev())
            .take_while(|(g, _)| *g > arrived.0)
            .any(|(_, s)| s == session);
        Owed {
            now: forgotten || ended,
            at_end: self.running.contains_key(session),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Owed = Owed {
        now: true,
        at_end: false,
    };
    const AT_END: Owed = Owed {
        now: false,
        at_end: true,
    };
    const BOTH: Owed = Owed {
        now: true,
        at_end: true,
    };

    #[test]
    fn nothing_is_owed_without_runs_or_for_runs_before_the_stamp() {
        let mut a = Activity::default();
        assert_eq!(a.owed("s", a.stamp()), Owed::default());
        a.begin("s");
        a.end("s");
        a.finish("s");
        assert_eq!(a.owed("s", a.stamp()), Owed::default());
    }

    #[test]
    fn a_run_that_ended_after_the_stamp_is_owed_now_and_only_to_its_session() {
        let mut a = Activity::default();
        let t = a.stamp();
        a.begin("s");
        a.end("s");
        a.finish("s");
        a.end("other");
        assert_eq!(a.owed("s", t), NOW);
        assert_eq!(a.owed("x", t), Owed::default());
    }

    #[test]
    fn a_run_under_way_is_owed_at_its_end_until_it_ends() {
        let mut a = Activity::default();
        a.begin("s");
        a.begin("s");
        let t = a.stamp();
        assert_eq!(a.owed("s", t), AT_END);
        a.end("s");
        a.finish("s");
        assert_eq!(a.owed("s", t), BOTH);
        a.end("s");
        a.finish("s");
        assert_eq!(a.owed("s", a.stamp()), Owed::default());
    }

    #[test]
    fn a_run_that_failed_before_its_report_is_owed_nothing_once_over() {
        let mut a = Activity::default();
        let t = a.stamp();
        a.begin("s");
        a.finish("s");
        assert_eq!(a.owed("s", t), Owed::default());
    }

    #[test]
    fn a_stamp_older_than_every_ended_run_kept_is_owed_everything() {
        let mut a = Activity::default();
        let t = a.stamp();
        for _ in 0..RECENT + 1 {
            a.end("busy");
        }
        assert_eq!(a.owed("quiet", t), NOW);
        assert_eq!(a.owed("quiet", a.stamp()), Owed::default());
        assert_eq!(a.ended.len(), RECENT);
    }
}

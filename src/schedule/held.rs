//! The plan when no Account can start a Run: what waits, counted by the store instead of read Job by Job, so that an idle tick costs the same behind ten Jobs or a hundred thousand.

use chrono::{DateTime, Utc};

use super::{AccountView, Decision};
use crate::config::TimeWindow;
use crate::model::JobState;

/// Open Jobs alike in all the plan asks of them, as the store counts them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueueGroup {
    /// The Account they are bound to; `None`: any.
    pub(crate) account: Option<String>,
    /// Queued or waiting.
    pub(crate) state: JobState,
    pub(crate) not_before: Option<DateTime<Utc>>,
    /// They run on another machine.
    pub(crate) elsewhere: bool,
    /// They wait for a Job that is not done.
    pub(crate) after: bool,
    pub(crate) count: usize,
}

/// The unfinished Jobs, counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueCount {
    /// The queued and waiting ones, in groups.
    pub(crate) groups: Vec<QueueGroup>,
    /// The running ones, oldest first (one per Account at most).
    pub(crate) running: Vec<String>,
}

impl QueueCount {
    /// Whether no Job is unfinished.
    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty() && self.open() == 0
    }

    /// The queued and waiting Jobs.
    fn open(&self) -> usize {
        self.groups.iter().map(|g| g.count).sum()
    }

    /// How many wait for the unschedulable `account` by name, as the plan's `waits_for`
    /// says it: bound to it or to none, and held back by nothing of their own (a time, a
    /// Job before them, another machine).
    pub(crate) fn waiting_for(&self, account: &AccountView, now: DateTime<Utc>) -> usize {
        self.groups
            .iter()
            .filter(|g| waits_for(g, account, now))
            .map(|g| g.count)
            .sum()
    }

    /// How many the idle line says wait for `account`: those waiting for it, and those a
    /// crossing of its ceiling put to wait until its reset.
    fn held_by(&self, account: &AccountView, now: DateTime<Utc>) -> usize {
        self.groups
            .iter()
            .filter(|g| {
                waits_for(g, account, now) || super::until_its_reset(g.state, g.not_before, account)
            })
            .map(|g| g.count)
            .sum()
    }
}

fn waits_for(g: &QueueGroup, account: &AccountView, now: DateTime<Utc>) -> bool {
    let until_later = g.state == JobState::Waiting && g.not_before.is_some_and(|t| t > now);
    !until_later
        && !g.after
        && !g.elsewhere
        && g.account.as_ref().is_none_or(|a| *a == account.name)
}

/// What a tick decides when no Account can start a Run, from the counts alone; `None`
/// when an Account could, or when it takes the Jobs themselves to say why nothing runs
/// (each waits for another Job, or for a time): then the whole plan is made.
pub(crate) fn held_decision(
    count: &QueueCount,
    accounts: &[AccountView],
    window: Option<TimeWindow>,
    now: DateTime<Utc>,
) -> Option<Decision> {
    if accounts.iter().any(|a| a.schedulable) {
        return None;
    }
    let running: Vec<&str> = count.running.iter().map(String::as_str).collect();
    let held_by = |a: &AccountView| count.held_by(a, now);
    let outside = super::outside(window, now);
    super::said_by_counts(count.open(), &running, outside, accounts, held_by)
        .map(|reason| Decision::Idle { reason })
}

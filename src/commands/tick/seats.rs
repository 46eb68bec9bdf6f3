//! Which Accounts this tick may start a Run on: those no live Run holds, whose run lock it took, within `maxConcurrentRuns` and the `--account` it was given.

use std::collections::BTreeMap;

use super::super::plan::{Occupied, Taken};
use super::*;

/// The Accounts a tick found free, their run locks held, and those it found taken.
pub(super) struct Seats {
    /// The Accounts no Run may start on now, and why.
    pub(crate) occupied: Occupied,
    /// The run locks of the free Accounts: the tick keeps the one its Run is on.
    free: BTreeMap<String, crate::lock::Held>,
    /// The Runs in progress on this machine, in words, oldest first.
    live: Vec<String>,
    /// Accounts outside this tick's `--account` whose run lock another tick holds: a Run
    /// being started there counts toward `maxConcurrentRuns` before the store records it.
    starting_elsewhere: usize,
}

impl Seats {
    /// Looks at every Account (or only `only`): one a live Run holds, as the store records
    /// it, is taken; so is one whose run lock another tick holds (its Run recorded and
    /// ending, or being settled); the others' run locks are taken.
    pub(super) fn take(ctx: &Ctx, store: &Store, only: Option<&str>) -> Result<Seats> {
        let live_runs = crate::recover::live_runs(store, &ctx.config)?;
        // maxConcurrentRuns counts this machine's Runs; every machine's holds its Account.
        let live = live_runs
            .iter()
            .filter(|r| crate::recover::is_mine(r, &ctx.config))
            .map(|r| format!("run {} of job {} on {}", r.run_id, r.job_id, r.account))
            .collect();
        let mut occupied = super::super::plan::occupied_by(&live_runs);
        ensure_private_dir(&ctx.config.state().locks())?;
        let mut free = BTreeMap::new();
        let mut starting_elsewhere = 0;
        for name in ctx.config.accounts.keys() {
            if let Some(only) = only.filter(|only| only != name) {
                // Under the pick lock no other tick is deciding: a run lock held now is a
                // Run being started (or probed for) by a tick that has decided.
                let live_here = occupied.contains_key(name);
                let path = ctx.config.state().account_lock(name);
                if !live_here && crate::lock::try_lock(&path)?.is_none() {
                    starting_elsewhere += 1;
                }
                let taken = Taken::NotThisTick {
                    only: only.to_string(),
                };
                occupied.insert(name.clone(), taken);
                continue;
            }
            if occupied.contains_key(name) {
                continue;
            }
            let path = ctx.config.state().account_lock(name);
            match crate::lock::try_lock(&path)? {
                Some(held) => {
                    free.insert(name.clone(), held);
                }
                None => {
                    let pid = crate::lock::holder(&path);
                    occupied.insert(name.clone(), Taken::Locked { pid });
                }
            }
        }
        Ok(Seats {
            occupied,
            free,
            live,
            starting_elsewhere,
        })
    }

    /// Why no Run may start at all: `maxConcurrentRuns` Runs are live already, or being
    /// started by ticks that hold their Accounts' run locks (with one per Account allowed,
    /// every Account is busy).
    pub(super) fn full(&self, cap: u32, accounts: usize) -> Option<String> {
        let starting = self
            .occupied
            .values()
            .filter(|t| matches!(t, Taken::Locked { .. }))
            .count()
            + self.starting_elsewhere;
        if self.live.len() + starting < cap as usize {
            return None;
        }
        if cap as usize >= accounts {
            return self.all_busy();
        }
        let more = match starting {
            0 => String::new(),
            1 => "; another tick is starting one more".into(),
            n => format!("; other ticks are starting {n} more"),
        };
        let live = match self.live.len() {
            0 => "no Run is live yet".to_string(),
            1 => format!("one Run is live: {}", self.live[0]),
            n => format!("{n} Runs are live: {}", self.live.join(", ")),
        };
        Some(format!("maxConcurrentRuns is {cap} and {live}{more}"))
    }

    /// Why a tick with queued work found nothing to start: every Account it could use is
    /// busy; `None` when none is (the queue waits for something else).
    pub(super) fn all_busy(&self) -> Option<String> {
        let busy: Vec<String> = self
            .occupied
            .iter()
            .filter(|(_, taken)| taken.is_busy())
            .map(|(name, taken)| match taken {
                Taken::Run { run_id, job_id } => format!("{name} runs job {job_id} (run {run_id})"),
                other => format!("{name}: {other}"),
            })
            .collect();
        (self.free.is_empty() && !busy.is_empty())
            .then(|| format!("every Account is busy: {}", busy.join("; ")))
    }

    /// Takes the run locks of `accounts` (each one this tick found free) out of the seats,
    /// to hold while they are probed outside the pick lock.
    pub(super) fn hold(&mut self, accounts: &[String]) -> Vec<crate::lock::Held> {
        accounts
            .iter()
            .filter_map(|a| self.free.remove(a))
            .collect()
    }

    /// Keeps the run lock of `account` for the Run, letting the others go.
    pub(super) fn keep(mut self, account: &str) -> Option<crate::lock::Held> {
        self.free.remove(account)
    }
}

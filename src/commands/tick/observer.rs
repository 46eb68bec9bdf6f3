//! What a tick does while its Run goes on: keeps the database current for `owl status`,
//! records every utilization figure before acting on it, and notices a cancel.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::config::Limits;
use crate::driver::AgentEvent;
use crate::model::JobState;
use crate::model::StopCause;
use crate::store::Store;
use crate::supervise::{LeaseClock, Observer, RunReport};
use crate::usage;

/// Keeps the database current while the Run goes on, and notices a cancel.
pub(super) struct TickObserver<'a> {
    store: &'a mut Store,
    run_id: i64,
    job_id: &'a str,
    account: &'a str,
    limits: Option<Limits>,
    /// The user's day, for the ceiling in force at each response (a night ceiling for a
    /// Window that resets before the morning).
    day: Option<crate::morning::Day>,
    /// The Account lets a Run go on when the plan bills extra usage (paid credits).
    allow_extra_usage: bool,
    /// The model the Run asked for, or (once the agent said) the one it runs: a per-model
    /// Window of another model does not stop it.
    model: Option<String>,
    /// The model family of each per-model Window, as a usage answer named it (the stream
    /// never does): a Window's figure from the stream is that family's.
    window_models: std::collections::BTreeMap<String, String>,
    /// The Account's `env:`, whose values never reach the database.
    env: &'a crate::config::Env,
    last_flush: Instant,
    dirty: bool,
    /// Snapshots a busy or full database refused, tried again later.
    pending: Vec<crate::model::Snapshot>,
    /// The line drawn on a terminal; `None` when stderr is not one.
    live: Option<super::live::LiveLine>,
    /// The Run's lease on a shared store, renewed while it goes on; `None` on SQLite.
    lease: Option<Lease>,
    /// The Account's learned reserve in force: the bound at each response as it stands
    /// then.
    reserve: Option<crate::commands::reserve::Reserve>,
}

/// A live Run's lease: renewed every `every`, and given up before it expires when the
/// store cannot be reached to renew it.
struct Lease {
    fence: i64,
    length: Duration,
    every: Duration,
    /// When it was last renewed; a thread of the supervisor kills the agent when that is
    /// two renewal periods from its end (`supervise::LeaseClock`).
    clock: std::sync::Arc<LeaseClock>,
}

/// How often live progress is written for `owl status`.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

impl<'a> TickObserver<'a> {
    pub(super) fn new(
        store: &'a mut Store,
        run_id: i64,
        job_id: &'a str,
        account: &'a str,
        (account_cfg, day): (&'a crate::config::Account, Option<crate::morning::Day>),
        model: Option<&str>,
    ) -> TickObserver<'a> {
        let window_models = store
            .latest_snapshots()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.account == account)
            .filter_map(|s| Some((s.window, s.model?)))
            .collect();
        TickObserver {
            window_models,
            store,
            run_id,
            job_id,
            account,
            limits: account_cfg.limits,
            day,
            allow_extra_usage: account_cfg.limits.is_some_and(|l| l.allow_extra_usage),
            model: model.map(String::from),
            env: &account_cfg.env,
            last_flush: Instant::now(),
            dirty: false,
            pending: Vec::new(),
            live: super::live::LiveLine::on_terminal(job_id, account),
            lease: None,
            reserve: None,
        }
    }

    /// Keeps the learned reserve's bounds current at each response of the Run.
    pub(super) fn keep_reserve(&mut self, reserve: Option<crate::commands::reserve::Reserve>) {
        self.reserve = reserve;
    }

    /// Keeps the Run's lease on a shared store: renewed every sixth of its length (2 to
    /// 10 s), so that a few failed renewals still leave time to stop before it expires.
    pub(super) fn hold_lease(&mut self, fence: i64, length: Duration) {
        let every = (length / 6).clamp(Duration::from_secs(2), Duration::from_secs(10));
        let kill_after = length.saturating_sub(every * 2);
        self.lease = Some(Lease {
            fence,
            length,
            every,
            clock: std::sync::Arc::new(LeaseClock::new(Instant::now(), kill_after, length)),
        });
    }

    /// Renews the lease when it is time; the stop when it is lost: another machine
    /// recorded the Run, or the store stayed out of reach until the lease was nearly out
    /// (stopped then, so that no other machine starts on the Account while this one runs).
    fn keep_lease(&mut self) -> Option<StopCause> {
        let lease = self.lease.as_mut()?;
        let renewed = lease.clock.renewed();
        if renewed.elapsed() < lease.every {
            return None;
        }
        // The server's `now()` is at or after this: the lease it sets ends no earlier.
        let sent = Instant::now();
        match self
            .store
            .renew_lease(self.run_id, lease.fence, lease.length)
        {
            Ok(true) => {
                lease.clock.renewed_at(sent);
                None
            }
            Ok(false) => Some(StopCause::LeaseLost(
                "another machine recorded this Run lost (its lease had expired)".into(),
            )),
            Err(e) if renewed.elapsed() + lease.every * 2 >= lease.length => {
                Some(StopCause::LeaseLost(format!(
                    "the store could not be reached to renew the lease for {} s ({e:#}); \
                     stopped before it expires",
                    renewed.elapsed().as_secs()
                )))
            }
            Err(e) => {
                tracing::warn!("renewing the lease of run {}: {e:#}", self.run_id);
                None
            }
        }
    }

    /// Figures are still recorded, but no ceiling stops the Run (`tick --ignore-ceiling`).
    /// Extra usage still does: that is a bill, not a ceiling.
    pub(super) fn ignore_ceilings(&mut self) {
        self.limits = None;
    }

    /// Writes what is pending, now waiting for the lock as long as any write may: the Run
    /// is over, so no stop deadline can be delayed.
    pub(super) fn finish(&mut self) {
        if let Some(live) = &self.live {
            live.clear();
        }
        if let Err(e) = self.store.supervising(None) {
            tracing::warn!("restoring the store's durability: {e:#}");
        }
        self.record_pending();
    }

    fn record_pending(&mut self) {
        let mut left = Vec::new();
        for s in self.pending.drain(..) {
            if let Err(e) = self.store.insert_snapshot(&s) {
                tracing::warn!("recording utilization of {}: {e:#}", self.account);
                left.push(s);
            }
        }
        self.pending = left;
    }

    fn flush(&mut self, report: &RunReport) {
        let last = self.env.scrub(report.last_event.as_deref().unwrap_or(""));
        if let Err(e) = self.store.set_run_progress(
            self.run_id,
            &last,
            report.api_retries,
            report.session_id.as_deref(),
        ) {
            tracing::warn!("recording progress of run {}: {e:#}", self.run_id);
        }
        self.last_flush = Instant::now();
        self.dirty = false;
    }
}

impl TickObserver<'_> {
    /// Records what an event says of the Account's utilization, then acts on it: every
    /// Snapshot is in the database before owl stops anything because of it.
    fn observe_utilization(&mut self, event: &AgentEvent) -> Option<StopCause> {
        // Most lines say nothing of utilization: they cost nothing here, not even a clock.
        if !matches!(
            event,
            AgentEvent::RateLimit(_)
                | AgentEvent::ControlResponse { usage: Some(_), .. }
                | AgentEvent::Usage { .. }
        ) {
            return None;
        }
        let now = crate::clock::now().unwrap_or_else(|_| Utc::now());
        let mut snapshots = usage::from_event(event, self.account, Some(self.run_id), now);
        for s in &mut snapshots {
            match &s.model {
                Some(model) => {
                    self.window_models.insert(s.window.clone(), model.clone());
                }
                None => s.model = self.window_models.get(&s.window).cloned(),
            }
        }
        // Written before acting on them; a write that cannot land at once (another
        // process holds the lock) is kept and tried again, and the stop goes ahead.
        self.pending.extend(snapshots.iter().cloned());
        self.record_pending();
        // Credits first: on credits the plan says `rejected`, but the Run goes on, billed.
        if let Some(stop) = usage::on_credits(event, self.allow_extra_usage) {
            return Some(stop);
        }
        if let AgentEvent::RateLimit(info) = event {
            if info.status == crate::driver::RateLimitStatus::Rejected && !info.on_credits {
                return Some(StopCause::RateLimited(crate::model::Rejection {
                    window: info.window.clone(),
                    until: info.resets_at.and_then(|s| DateTime::from_timestamp(s, 0)),
                }));
            }
        }
        // The bound in force at this response: a learned reserve's as it stands now; a
        // Window that closes before the morning is held to the night ceiling, the one a Run
        // opened after it to its own.
        if let (Some(reserve), Some(limits)) = (&self.reserve, self.limits.as_mut()) {
            reserve.update(limits, &snapshots, now);
        }
        let tonight = self.day.and_then(|day| {
            crate::morning::Tonight::of_day(day, self.limits.as_ref(), now, &chrono::Local)
        });
        usage::crossing(
            &snapshots,
            (self.limits.as_ref(), tonight.as_ref()),
            self.model.as_deref(),
        )
        .or_else(|| self.owl_share_crossing(&snapshots))
    }
}

impl TickObserver<'_> {
    /// The owl-share cap a figure crosses: the points owl's settled Runs used of its Window
    /// instance, with what this Run used so far (its figure less the one it started from).
    fn owl_share_crossing(&self, snapshots: &[crate::model::Snapshot]) -> Option<StopCause> {
        let limits = self.limits.as_ref()?;
        snapshots.iter().find_map(|s| {
            let (limit, cap) = limits.owl_cap(&s.window)?;
            let reset = s.resets_at?;
            let (settled, _) = self
                .store
                .instance_share(self.account, &s.window, reset)
                .ok()?;
            let (baseline, _) = self
                .store
                .run_baseline(self.run_id, &s.window, reset)
                .ok()?;
            let points = crate::model::round_percent(settled + (s.percent - baseline).max(0.0));
            (points >= cap).then(|| {
                StopCause::Ceiling(crate::model::Crossing {
                    window: s.window.clone(),
                    percent: points,
                    limit: limit.to_string(),
                    ceiling: cap,
                    resets_at: Some(reset),
                })
            })
        })
    }
}

impl Observer for TickObserver<'_> {
    fn spawned(&mut self, agent: &crate::supervise::HandleId) {
        let (pid, start) = (agent.pid.into(), agent.start_time);
        if let Err(e) = self.store.set_run_process(self.run_id, pid, start) {
            tracing::warn!("recording the agent's pid for run {}: {e:#}", self.run_id);
        }
    }

    fn event(&mut self, event: &AgentEvent, report: &RunReport) -> Option<StopCause> {
        self.dirty = true;
        if let AgentEvent::Init { model: Some(m), .. } = event {
            self.model = Some(m.clone());
        }
        if let Some(live) = self.live.as_mut() {
            live.note(event);
            live.draw(report);
        }
        if matches!(event, AgentEvent::Init { .. }) || self.last_flush.elapsed() >= PROGRESS_EVERY {
            self.flush(report);
        }
        self.observe_utilization(event)
    }

    fn lease_clock(&self) -> Option<std::sync::Arc<LeaseClock>> {
        self.lease.as_ref().map(|lease| lease.clock.clone())
    }

    fn heartbeat(&mut self, report: &RunReport) -> Option<StopCause> {
        if let Some(live) = self.live.as_mut() {
            live.draw(report);
        }
        if self.dirty && self.last_flush.elapsed() >= PROGRESS_EVERY {
            self.flush(report);
        }
        if !self.pending.is_empty() {
            self.record_pending();
        }
        if let Some(lost) = self.keep_lease() {
            return Some(lost);
        }
        match self.store.job_state(self.job_id) {
            Ok(Some(JobState::Cancelled)) => Some(StopCause::Cancelled),
            _ => None,
        }
    }
}

//! Eligibility and the pick: pure functions of (Jobs, Accounts, Snapshots, now), so every decision can be explained and tested.

use std::collections::BTreeMap;

use chrono::{DateTime, Local, Utc};
use serde::Serialize;

use crate::clock::{human, local_hm};
use crate::config::{Config, TimeWindow};
use crate::model::{AccountNote, JobState, PlanJob, Snapshot, WindowKind};
pub(crate) use crate::text::fmt_percent;

mod forecast;
mod held;
mod standing;
pub(crate) use forecast::*;
pub(crate) use held::*;
pub(crate) use standing::*;

/// One Window of one Account as scheduling sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WindowView {
    pub(crate) window: String,
    /// What it limits: the five-hour Window, a weekly one, one model family's week.
    pub(crate) kind: WindowKind,
    /// The model family a per-model Window limits, when known.
    pub(crate) model: Option<String>,
    /// `None` when the last figure is from before the Window's reset (it no longer holds).
    pub(crate) percent: Option<f64>,
    /// The ceiling in force now: the configured one, or the night ceiling (see `night`).
    pub(crate) ceiling: Option<f64>,
    /// The config key of the ceiling in force (`fiveHourMax`, …, or `nightMax`).
    pub(crate) limit: Option<&'static str>,
    /// When the night ceiling holds: the Window resets before the morning.
    pub(crate) night: Option<NightCeiling>,
    pub(crate) resets_at: Option<DateTime<Utc>>,
    pub(crate) observed_at: DateTime<Utc>,
    pub(crate) source: crate::model::SnapshotSource,
    pub(crate) run_id: Option<i64>,
    /// The figure is at or above the Ceiling (for a per-model Window: and it limits the
    /// model the Account's Jobs run, or that model is unknown).
    pub(crate) over: bool,
}

impl WindowView {
    /// Its name as people read it: a per-model Window with its model's.
    pub(crate) fn label(&self) -> String {
        window_label(&self.window, self.model.as_deref())
    }
}

/// Why a Window is held to the night ceiling: it resets before the user's morning, and its
/// configured ceiling (`limit`, `ceiling`) is the day's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct NightCeiling {
    pub(crate) morning: DateTime<Utc>,
    pub(crate) limit: &'static str,
    pub(crate) ceiling: f64,
}

impl WindowView {
    /// Why its ceiling is what it is, when that is the night's: "night ceiling 85:
    /// resets 03:00, before the morning at 07:00 (fiveHourMax 60 by day)".
    pub(crate) fn night_reason(&self) -> Option<String> {
        let night = self.night?;
        Some(format!(
            "night ceiling {}: resets {}, before the morning at {} ({} {} by day)",
            fmt_percent(self.ceiling.unwrap_or(0.0)),
            self.resets_at.map_or("?".into(), local_hm),
            local_hm(night.morning),
            night.limit,
            fmt_percent(night.ceiling)
        ))
    }
}

/// A Window's name with the model family it limits: `seven_day_overage_included (Fable)`.
pub(crate) fn window_label(window: &str, model: Option<&str>) -> String {
    match model {
        // `seven_day_opus` says its model already.
        Some(m) if !window.to_lowercase().contains(&m.to_lowercase()) => {
            format!("{window} ({m})")
        }
        _ => window.to_string(),
    }
}

/// Why one Job will or will not run now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct QueueEntry {
    pub(crate) job_id: String,
    pub(crate) state: JobState,
    pub(crate) not_before: Option<DateTime<Utc>>,
    /// The Account it would run on, when it would run now.
    pub(crate) account: Option<String>,
    pub(crate) eligible: bool,
    pub(crate) reason: String,
    /// The unschedulable Accounts this Job waits for (its own, or every one for a Job
    /// bound to none): counted by name, never by matching words in `reason`.
    #[serde(skip)]
    pub(crate) waits_for: Vec<String>,
    /// The Jobs it waits for that are not done yet.
    #[serde(skip)]
    pub(crate) after: Vec<String>,
    /// It waits for a person: a Job it waits for ended without being done (cancelled,
    /// failed, blocked), and only a requeue of that one (or a cancel of this) moves it.
    #[serde(skip)]
    pub(crate) held: bool,
}

/// What a tick would do now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Run { job_id: String, account: String },
    Idle { reason: String },
}

/// The plan: every unfinished Job in the order a tick takes them, and the decision.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) queue: Vec<QueueEntry>,
    pub(crate) decision: Decision,
}

impl Plan {
    /// Why the Job does not run now, in the words of `status`; `None` when it is eligible
    /// (or not in the queue).
    pub(crate) fn waits_because(&self, job_id: &str) -> Option<&str> {
        self.queue
            .iter()
            .find(|q| q.job_id == job_id)
            .filter(|q| !q.eligible && !q.reason.is_empty())
            .map(|q| q.reason.as_str())
    }

    /// Where an unfinished Job stands, in the words of `status`'s queue line (why it waits,
    /// that it is ready behind another, or outside the schedule window); `None` when the
    /// queue has nothing to say of it.
    pub(crate) fn stands(&self, job_id: &str) -> Option<&str> {
        self.queue
            .iter()
            .find(|q| q.job_id == job_id)
            .map(|q| q.reason.as_str())
            .filter(|r| !r.is_empty())
    }
}

/// Orders the unfinished Jobs (highest priority first, then oldest) and picks the first
/// that may run now.
pub(crate) fn plan(
    jobs: &[PlanJob],
    accounts: &[AccountView],
    window: Option<TimeWindow>,
    now: DateTime<Utc>,
) -> Plan {
    let mut open: Vec<&PlanJob> = jobs.iter().filter(|j| !j.state.is_finished()).collect();
    // Stable sort keeps insertion order (oldest first) within a priority.
    open.sort_by_key(|j| std::cmp::Reverse(j.priority));

    let outside = outside(window, now);
    // A Run in progress holds its own Account only (the caller marks it unschedulable):
    // the Jobs behind it may run on the others.
    let running: Vec<&PlanJob> = jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .collect();

    let mut queue = Vec::new();
    let mut chosen: Option<(String, String)> = None;
    for job in open {
        let (eligible, account, reason) = judge(job, accounts, now);
        let waits_for_time =
            job.state == JobState::Waiting && job.not_before.is_some_and(|t| t > now);
        let waits_for: Vec<String> = match (&job.account, eligible, job.state) {
            (_, true, _) | (_, _, JobState::Running) => Vec::new(),
            _ if waits_for_time || unmet(job).next().is_some() || job.elsewhere.is_some() => {
                Vec::new()
            }
            (Some(name), false, _) => vec![name.clone()],
            (None, false, _) => accounts
                .iter()
                .filter(|a| !a.schedulable)
                .map(|a| a.name.clone())
                .collect(),
        };
        let reason = match (eligible, outside, &chosen) {
            (false, ..) => reason,
            (true, Some(w), _) => format!("ready, but outside the schedule window {w}"),
            (true, None, None) => {
                chosen = Some((job.id.clone(), account.clone().unwrap_or_default()));
                let name = account.as_deref().unwrap_or("?");
                let view = accounts.iter().find(|a| a.name == name);
                match view.and_then(|a| a.agent_problem.as_ref()) {
                    Some(problem) => format!(
                        "next: runs on {name}, but the last tick refused the agent CLI: {problem}"
                    ),
                    // Not promised before the login is seen to work.
                    None if !view.is_some_and(|a| a.login_seen) => {
                        format!("next: tries {name} (its login is not checked yet)")
                    }
                    None if !view.is_some_and(AccountView::utilization_known) => {
                        format!("next: runs on {name} (its utilization is not known yet)")
                    }
                    // Why this Account, when the morning plan chose it among several.
                    None if !reason.is_empty() => format!("next: runs on {name}: {reason}"),
                    None => format!("next: runs on {name}"),
                }
            }
            // Queue order, not a dependency: "after" is said only of the Jobs a Job waits for.
            (true, None, Some((first, _))) => format!("ready, behind {first} in the queue"),
        };
        queue.push(QueueEntry {
            job_id: job.id.clone(),
            state: job.state,
            not_before: job.not_before,
            account: account.filter(|_| eligible),
            eligible,
            reason,
            waits_for,
            after: unmet(job).map(|(id, _)| id.clone()).collect(),
            held: unmet(job).any(|(_, state)| state.is_finished()),
        });
    }

    let decision = match chosen {
        Some((job_id, account)) => Decision::Run { job_id, account },
        None => Decision::Idle {
            reason: idle_reason_beside_held(&queue, accounts, outside, &running),
        },
    };
    Plan { queue, decision }
}

/// Why nothing runs, of the Jobs a tick could take: those that wait for a person (a Job
/// they wait for ended undone) are listed for the person, not counted here.
fn idle_reason_beside_held(
    queue: &[QueueEntry],
    accounts: &[AccountView],
    outside: Option<TimeWindow>,
    running: &[&PlanJob],
) -> String {
    let takeable: Vec<QueueEntry> = queue.iter().filter(|q| !q.held).cloned().collect();
    let held = queue.len() - takeable.len();
    if takeable.iter().all(|q| q.state == JobState::Running) && held > 0 {
        return match held {
            1 => "1 Job waits for you: a Job it waits for ended without being done".into(),
            n => format!("{n} Jobs wait for you: Jobs they wait for ended without being done"),
        };
    }
    idle_reason(&takeable, accounts, outside, running)
}

/// The Jobs `job` waits for that are not done, with their states.
fn unmet(job: &PlanJob) -> impl Iterator<Item = &(String, JobState)> {
    job.after
        .iter()
        .filter(|(_, state)| *state != JobState::Done)
}

/// Whether a Job may run now, on which Account, and why not.
fn judge(
    job: &PlanJob,
    accounts: &[AccountView],
    now: DateTime<Utc>,
) -> (bool, Option<String>, String) {
    if job.state != JobState::Running {
        let waits: Vec<String> = unmet(job)
            .map(|(id, state)| format!("{id} ({state})"))
            .collect();
        let ended: Vec<(&String, &JobState)> = unmet(job)
            .filter(|(_, state)| state.is_finished())
            .map(|(id, state)| (id, state))
            .collect();
        if let Some(&(id, state)) = ended.first() {
            // Only a person moves it: the Job it waits for will never be done by itself.
            return (
                false,
                None,
                format!(
                    "after {id}, which is {state}: `owl requeue {id}` releases it (or \
                     `owl cancel {}`)",
                    job.id
                ),
            );
        }
        if !waits.is_empty() {
            return (false, None, format!("after {}", waits.join(", ")));
        }
    }
    if let Some(why) = job
        .elsewhere
        .as_ref()
        .filter(|_| job.state != JobState::Running)
    {
        return (false, None, why.clone());
    }
    match job.state {
        JobState::Running => return (false, job.account.clone(), "running now".into()),
        JobState::Waiting => {
            if let Some(t) = job.not_before.filter(|t| *t > now) {
                let why = job.reason.as_deref().unwrap_or("waiting");
                return (
                    false,
                    None,
                    format!("waits until {} (in {}): {why}", local_hm(t), human(t - now)),
                );
            }
        }
        _ => {}
    }
    match &job.account {
        Some(name) => match accounts.iter().find(|a| &a.name == name) {
            None => (false, None, format!("account '{name}' is not configured")),
            Some(a) if !a.schedulable => (false, None, format!("waits for account {}", a.brief)),
            Some(a) => (true, Some(a.name.clone()), String::new()),
        },
        None => {
            let schedulable: Vec<&AccountView> =
                accounts.iter().filter(|a| a.schedulable).collect();
            match best_account(&schedulable) {
                Some(a) => (true, Some(a.name.clone()), why_account(a, &schedulable)),
                None => {
                    let why: Vec<&str> = accounts.iter().map(|a| a.brief.as_str()).collect();
                    (
                        false,
                        None,
                        format!(
                            "waits for any Account to be schedulable ({})",
                            why.join("; ")
                        ),
                    )
                }
            }
        }
    }
}

/// The Account a Job bound to none runs on: first the one whose room expires soonest (a
/// Window that resets before the morning, under its night ceiling: spent tonight or never),
/// then the one with the most headroom, then by name.
fn best_account<'a>(schedulable: &[&'a AccountView]) -> Option<&'a AccountView> {
    schedulable.iter().copied().min_by(|a, b| {
        let expiry = |v: &AccountView| v.expiring.as_ref().map(|(t, _)| *t);
        match (expiry(a), expiry(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
        .then(b.headroom.total_cmp(&a.headroom))
        .then(a.name.cmp(&b.name))
    })
}

/// Why a Job bound to no Account runs on `chosen`, when the morning plan chose it among
/// several: its room expires first. Empty otherwise (the most headroom, as always, or the
/// only one).
fn why_account(chosen: &AccountView, schedulable: &[&AccountView]) -> String {
    match &chosen.expiring {
        Some((at, window)) if schedulable.len() > 1 => format!(
            "its {window} resets at {}, before the morning, and the room left under its \
             night ceiling expires then",
            local_hm(*at)
        ),
        _ => String::new(),
    }
}

/// The schedule window `now` is outside of, if any.
fn outside(window: Option<TimeWindow>, now: DateTime<Utc>) -> Option<TimeWindow> {
    let local = now.with_timezone(&Local).time();
    window.filter(|w| !w.contains(local))
}

fn idle_reason(
    queue: &[QueueEntry],
    accounts: &[AccountView],
    outside: Option<TimeWindow>,
    running: &[&PlanJob],
) -> String {
    let open = queue
        .iter()
        .filter(|q| q.state != JobState::Running)
        .count();
    let running: Vec<&str> = running.iter().map(|j| j.id.as_str()).collect();
    let held_by = |a: &AccountView| {
        queue
            .iter()
            .filter(|q| q.waits_for.contains(&a.name) || until_its_reset(q.state, q.not_before, a))
            .count()
    };
    if let Some(said) = said_by_counts(open, &running, outside, accounts, held_by) {
        return said;
    }
    let waiting = queue
        .iter()
        .filter(|q| q.state == JobState::Waiting)
        .count();
    let after: Vec<&QueueEntry> = queue.iter().filter(|q| !q.after.is_empty()).collect();
    if !after.is_empty() && after.len() == open {
        return match after.as_slice() {
            [one] => format!("{} waits: {}", one.job_id, one.reason),
            many => format!(
                "every queued Job waits for another; first {}: {}",
                many[0].job_id, many[0].reason
            ),
        };
    }
    if waiting > 0 {
        let next = queue.iter().filter_map(|q| q.not_before).min();
        return match next {
            Some(t) => format!(
                "{waiting} {} {} until a later time; the first at {}",
                jobs_word(waiting),
                if waiting == 1 { "waits" } else { "wait" },
                local_hm(t)
            ),
            None => format!("{waiting} {} waiting", jobs_word(waiting)),
        };
    }
    "no Job is eligible".into()
}

/// A Job a crossing of the Account's ceiling put to wait until the same reset.
fn until_its_reset(state: JobState, not_before: Option<DateTime<Utc>>, a: &AccountView) -> bool {
    state == JobState::Waiting && not_before.is_some() && not_before == a.until
}

/// Why nothing runs, as far as counts say it: `open` Jobs not running, the `running`
/// ones, and how many each unschedulable Account holds back (`held_by`). `None` when no
/// Account holds any back: then only the Jobs themselves say why (each waits for another
/// Job, or for a time).
fn said_by_counts(
    open: usize,
    running: &[&str],
    outside: Option<TimeWindow>,
    accounts: &[AccountView],
    held_by: impl Fn(&AccountView) -> usize,
) -> Option<String> {
    if open == 0 {
        // Nothing but what runs already: the queue is not waiting for anything.
        return Some(match running {
            [] => "the queue is empty".into(),
            [one] => format!("a Run of {one} is in progress"),
            many => format!("Runs of {} are in progress", many.join(", ")),
        });
    }
    if let Some(w) = outside {
        return Some(format!("it is outside the schedule window {w}"));
    }
    // Waiting for each: Jobs held back by its reason, and Jobs a crossing of its Ceiling
    // put to wait until the same reset.
    let parts: Vec<String> = accounts
        .iter()
        .filter(|a| !a.schedulable)
        .filter_map(|a| {
            let n = held_by(a);
            let verb = if n == 1 { "waits" } else { "wait" };
            (n > 0).then(|| format!("{} ({n} {} {verb} for it)", a.brief, jobs_word(n)))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn jobs_word(n: usize) -> &'static str {
    if n == 1 {
        "Job"
    } else {
        "Jobs"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Job;

    /// The plan of whole Jobs, as the tests build them.
    fn plan(
        jobs: &[Job],
        accounts: &[AccountView],
        window: Option<TimeWindow>,
        now: DateTime<Utc>,
    ) -> Plan {
        let jobs: Vec<PlanJob> = jobs.iter().map(PlanJob::from).collect();
        super::plan(&jobs, accounts, window, now)
    }
    use crate::config;

    fn t(s: &str) -> DateTime<Utc> {
        crate::clock::parse(s).unwrap()
    }

    fn job(id: &str, priority: i64, account: Option<&str>) -> Job {
        Job {
            id: id.into(),
            name: None,
            prompt: "p".into(),
            repo: "/r".into(),
            base: "HEAD".into(),
            base_commit: None,
            account: account.map(String::from),
            priority,
            max_runs: 5,
            max_run_time_secs: 60,
            max_budget_usd: None,
            max_job_budget_usd: None,
            permission_mode: "dontAsk".into(),
            allowed_tools: vec![],
            disallowed_tools: vec![],
            allow_hosts: vec![],
            model: None,
            check: None,
            after: vec![],
            base_after: None,
            state: JobState::Queued,
            reason: None,
            not_before: None,
            created_at: t("2026-11-30T00:00:00Z"),
            updated_at: t("2026-11-30T00:00:00Z"),
            machine: None,
        }
    }

    fn cfg() -> Config {
        config::parse(
            "accounts:\n  work:\n    limits: {fiveHourMax: 60, weeklyMax: 50}\n  home:\n    limits: {fiveHourMax: 60}\n  free: {}\n",
            "x",
        )
        .unwrap()
    }

    fn snap(account: &str, window: &str, percent: f64, resets: &str) -> Snapshot {
        Snapshot {
            account: account.into(),
            window: window.into(),
            percent,
            resets_at: Some(t(resets)),
            observed_at: t("2026-11-30T01:00:00Z"),
            source: crate::model::SnapshotSource::GetUsage,
            run_id: None,
            model: None,
        }
    }

    const NOW: &str = "2026-11-30T02:00:00Z";

    #[test]
    fn a_job_after_another_waits_until_it_is_done_and_says_for_what() {
        let views = account_views(&cfg(), &[], &BTreeMap::new(), t(NOW));
        let mut second = PlanJob::from(&job("b", 9, None));
        second.state = JobState::Waiting;
        let first = PlanJob::from(&job("a", 0, None));
        for (state, eligible) in [
            (JobState::Queued, false),
            (JobState::Failed, false),
            (JobState::Done, true),
        ] {
            second.after = vec![("a".into(), state)];
            let p = super::plan(&[first.clone(), second.clone()], &views, None, t(NOW));
            let b = p.queue.iter().find(|q| q.job_id == "b").unwrap();
            assert_eq!(b.eligible, eligible, "{state}: {b:?}");
            if !eligible {
                assert_eq!(b.after, ["a"]);
            }
            // One that ended undone holds it for a person, who is told what releases it.
            match state {
                JobState::Queued => assert_eq!(b.reason, "after a (queued)"),
                JobState::Failed => assert_eq!(
                    b.reason,
                    "after a, which is failed: `owl requeue a` releases it (or `owl cancel b`)"
                ),
                _ => {}
            }
            assert_eq!(b.held, state == JobState::Failed, "{state}");
        }
        // Only Jobs that wait for others: the idle reason says so.
        second.after = vec![("a".into(), JobState::Queued)];
        let p = super::plan(&[second.clone()], &views, None, t(NOW));
        assert_eq!(
            p.decision,
            Decision::Idle {
                reason: "b waits: after a (queued)".into()
            }
        );
        // Only Jobs held for a person: they are not counted as work that waits.
        second.after = vec![("a".into(), JobState::Blocked)];
        let p = super::plan(&[second], &views, None, t(NOW));
        assert_eq!(
            p.decision,
            Decision::Idle {
                reason: "1 Job waits for you: a Job it waits for ended without being done".into()
            }
        );
    }

    #[test]
    fn priority_first_then_oldest() {
        let views = account_views(&cfg(), &[], &BTreeMap::new(), t(NOW));
        let jobs = vec![job("a", 0, None), job("b", 5, None), job("c", 5, None)];
        let p = plan(&jobs, &views, None, t(NOW));
        let order: Vec<&str> = p.queue.iter().map(|q| q.job_id.as_str()).collect();
        assert_eq!(order, ["b", "c", "a"]);
        assert!(matches!(p.decision, Decision::Run { ref job_id, .. } if job_id == "b"));
    }

    #[test]
    fn an_account_over_its_ceiling_is_not_scheduled() {
        let snaps = vec![snap("work", "five_hour", 72.0, "2026-11-30T03:40:00Z")];
        let views = account_views(&cfg(), &snaps, &BTreeMap::new(), t(NOW));
        let work = views.iter().find(|a| a.name == "work").unwrap();
        assert!(!work.schedulable);
        assert!(
            work.reason
                .starts_with("work: five_hour 72% >= fiveHourMax 60 — not scheduled until"),
            "{}",
            work.reason
        );
        let p = plan(&[job("a", 0, Some("work"))], &views, None, t(NOW));
        assert!(matches!(p.decision, Decision::Idle { .. }));
        assert!(p.queue[0].reason.starts_with("waits for account work:"));
    }

    #[test]
    fn a_figure_from_before_the_reset_is_discarded() {
        let snaps = vec![snap("work", "five_hour", 95.0, "2026-11-30T01:30:00Z")];
        let views = account_views(&cfg(), &snaps, &BTreeMap::new(), t(NOW));
        let work = views.iter().find(|a| a.name == "work").unwrap();
        assert!(work.schedulable);
        assert_eq!(work.windows[0].percent, None);
    }

    #[test]
    fn a_figure_over_its_ceiling_without_a_reset_expires_after_its_window() {
        let mut s = snap("work", "five_hour", 95.0, "2026-11-30T05:00:00Z");
        s.resets_at = None;
        let view_at = |now: &str| {
            let views = account_views(&cfg(), &[s.clone()], &BTreeMap::new(), t(now));
            views.into_iter().find(|a| a.name == "work").unwrap()
        };
        // Observed at 01:00: parked until 06:00, five hours on.
        let parked = view_at("2026-11-30T05:59:00Z");
        assert!(!parked.schedulable);
        assert!(
            matches!(parked.standing, Standing::OverCeiling { resets_at: None, expires_at, .. }
                if expires_at == t("2026-11-30T06:00:00Z")),
            "{:?}",
            parked.standing
        );
        assert!(view_at("2026-11-30T06:00:00Z").schedulable);
        // Six months on, certainly.
        assert!(view_at("2027-06-01T00:00:00Z").schedulable);
        let mut weekly = s.clone();
        weekly.window = "seven_day".into();
        let views = account_views(
            &cfg(),
            &[weekly],
            &BTreeMap::new(),
            t("2026-12-06T00:00:00Z"),
        );
        assert!(!views.iter().find(|a| a.name == "work").unwrap().schedulable);
    }

    #[test]
    fn an_account_not_logged_in_is_not_scheduled_and_says_how_to_log_in() {
        let config = config::parse(
            "accounts:\n  work:\n    credentialStore: /creds/work\n",
            "x",
        )
        .unwrap();
        let note = AccountNote {
            not_logged_in: Some("not logged in: Not logged in · Please run /login".into()),
            ..Default::default()
        };
        let notes = BTreeMap::from([("work".to_string(), note)]);
        let views = account_views(&config, &[], &notes, t(NOW));
        assert!(!views[0].schedulable);
        assert!(
            views[0].reason.ends_with(
                "log in with `CLAUDE_CONFIG_DIR=/creds/work claude`, then /login, then \
                     `owl probe work`"
            ),
            "{}",
            views[0].reason
        );
        // The queue and the idle line name the Account's standing, not its login steps again.
        let p = plan(&[job("a", 0, Some("work"))], &views, None, t(NOW));
        let Decision::Idle { reason } = &p.decision else {
            panic!("{:?}", p.decision)
        };
        assert_eq!(
            reason,
            "work: not logged in: Not logged in · Please run /login (1 Job waits for it)"
        );
    }

    #[test]
    fn an_account_backing_off_an_outage_waits_until_then() {
        let note = AccountNote {
            backoff_until: Some(t("2026-11-30T02:10:00Z")),
            outages: 2,
            ..Default::default()
        };
        let notes = BTreeMap::from([("free".to_string(), note)]);
        let views = account_views(&cfg(), &[], &notes, t(NOW));
        let free = views.iter().find(|a| a.name == "free").unwrap();
        assert!(!free.schedulable);
        assert_eq!(free.until, Some(t("2026-11-30T02:10:00Z")));
        assert_eq!(
            free.standing,
            Standing::BackingOff {
                outages: 2,
                until: t("2026-11-30T02:10:00Z")
            }
        );
        let later = account_views(&cfg(), &[], &notes, t("2026-11-30T02:10:00Z"));
        assert!(later.iter().find(|a| a.name == "free").unwrap().schedulable);
    }

    #[test]
    fn a_full_model_week_holds_the_account_while_its_week_reads_30() {
        let config = config::parse(
            "accounts:\n  work:\n    limits: {fiveHourMax: 60, weeklyMax: 50, modelWeeklyMax: 90}\n",
            "x",
        )
        .unwrap();
        let mut fable = snap(
            "work",
            "seven_day_overage_included",
            95.0,
            "2026-12-04T00:00:00Z",
        );
        fable.model = Some("Fable".into());
        let snaps = vec![
            snap("work", "five_hour", 20.0, "2026-11-30T04:00:00Z"),
            snap("work", "seven_day", 30.0, "2026-12-05T00:00:00Z"),
            fable.clone(),
        ];
        let views = account_views(&config, &snaps, &BTreeMap::new(), t(NOW));
        let work = &views[0];
        assert!(!work.schedulable);
        assert!(
            matches!(&work.standing, Standing::OverCeiling { window, limit: "modelWeeklyMax", ceiling, .. }
                if window == "seven_day_overage_included (Fable)" && *ceiling == 90.0),
            "{:?}",
            work.standing
        );
        assert_eq!(work.until, Some(t("2026-12-04T00:00:00Z")));
        let w = work
            .windows
            .iter()
            .find(|w| w.kind == WindowKind::ModelWeekly)
            .unwrap();
        assert_eq!(w.model.as_deref(), Some("Fable"));
        // At 100 a Run would be refused or billed: held even with no ceiling for it.
        fable.percent = 100.0;
        let bare = config::parse("accounts:\n  work: {}\n", "x").unwrap();
        let views = account_views(&bare, &[fable.clone()], &BTreeMap::new(), t(NOW));
        assert!(
            matches!(&views[0].standing, Standing::OnCredits { window: Some(w), until: Some(_) }
                if w == "seven_day_overage_included (Fable)"),
            "{:?}",
            views[0].standing
        );
        assert!(
            views[0].reason.contains("allowExtraUsage is off"),
            "{}",
            views[0].reason
        );
        // Unless the Account allows extra usage, or its Jobs run another model.
        let allowed = config::parse(
            "accounts:\n  work:\n    limits: {allowExtraUsage: true}\n",
            "x",
        )
        .unwrap();
        let views = account_views(&allowed, &[fable.clone()], &BTreeMap::new(), t(NOW));
        assert!(views[0].schedulable, "{}", views[0].reason);
        let sonnet = config::parse(
            "defaults:\n  model: claude-sonnet-5-5\naccounts:\n  work: {}\n",
            "x",
        )
        .unwrap();
        let views = account_views(&sonnet, &[fable], &BTreeMap::new(), t(NOW));
        assert!(views[0].schedulable, "{}", views[0].reason);
    }

    #[test]
    fn a_run_found_on_credits_holds_the_account_until_the_reset() {
        let note = AccountNote {
            on_credits_until: Some(t("2026-11-30T04:00:00Z")),
            on_credits_window: Some("five_hour".into()),
            ..Default::default()
        };
        let notes = BTreeMap::from([("work".to_string(), note)]);
        let snaps = vec![snap("work", "five_hour", 50.0, "2026-11-30T04:00:00Z")];
        let views = account_views(&cfg(), &snaps, &notes, t(NOW));
        let work = views.iter().find(|a| a.name == "work").unwrap();
        assert!(!work.schedulable);
        assert_eq!(work.until, Some(t("2026-11-30T04:00:00Z")));
        assert!(
            work.reason.contains("extra usage: five_hour is used up"),
            "{}",
            work.reason
        );
        let later = account_views(&cfg(), &snaps, &notes, t("2026-11-30T04:00:00Z"));
        assert!(later.iter().find(|a| a.name == "work").unwrap().schedulable);
    }

    #[test]
    fn weekly_max_applies_to_every_seven_day_window() {
        let snaps = vec![
            snap("work", "seven_day", 30.0, "2026-12-04T00:00:00Z"),
            snap("work", "seven_day_opus", 55.0, "2026-12-04T00:00:00Z"),
        ];
        let views = account_views(&cfg(), &snaps, &BTreeMap::new(), t(NOW));
        let work = views.iter().find(|a| a.name == "work").unwrap();
        assert!(!work.schedulable, "{}", work.reason);
        // The words come from the standing, which carries the facts.
        assert!(
            matches!(
                &work.standing,
                Standing::OverCeiling { window, limit: "weeklyMax", percent, ceiling, .. }
                    if window == "seven_day_opus" && *percent == 55.0 && *ceiling == 50.0
            ),
            "{:?}",
            work.standing
        );
    }

    #[test]
    fn an_account_without_figures_has_no_night_ceiling_and_nothing_to_forecast() {
        let config = config::parse(
            "schedule:\n  window: \"22:00-07:00\"\naccounts:\n  work:\n    limits: {fiveHourMax: 60}\n",
            "x",
        )
        .unwrap();
        let now = t("2026-11-30T03:00:00Z");
        let views = account_views(&config, &[], &BTreeMap::new(), now);
        let work = &views[0];
        assert!(work.schedulable, "{:?}", work.standing);
        assert!(work.windows.is_empty() && work.expiring.is_none());
        let (_, windows) = work.morning.as_ref().expect("a morning is configured");
        assert!(windows.is_empty());
        assert_eq!(describe(now, windows), None);
    }

    #[test]
    fn an_unbound_job_goes_to_the_most_headroom() {
        let snaps = vec![
            snap("work", "five_hour", 50.0, "2026-11-30T03:00:00Z"),
            snap("home", "five_hour", 20.0, "2026-11-30T03:00:00Z"),
        ];
        let mut c = cfg();
        c.accounts.remove("free");
        let views = account_views(&c, &snaps, &BTreeMap::new(), t(NOW));
        let p = plan(&[job("a", 0, None)], &views, None, t(NOW));
        assert_eq!(
            p.decision,
            Decision::Run {
                job_id: "a".into(),
                account: "home".into()
            }
        );
    }

    #[test]
    fn a_waiting_job_runs_after_not_before() {
        let views = account_views(&cfg(), &[], &BTreeMap::new(), t(NOW));
        let mut j = job("a", 0, Some("work"));
        j.state = JobState::Waiting;
        j.not_before = Some(t("2026-11-30T03:00:00Z"));
        let p = plan(std::slice::from_ref(&j), &views, None, t(NOW));
        assert_eq!(
            p.decision,
            Decision::Idle {
                reason: format!(
                    "1 Job waits until a later time; the first at {}",
                    local_hm(t("2026-11-30T03:00:00Z"))
                )
            }
        );
        let p = plan(&[j], &views, None, t("2026-11-30T03:00:01Z"));
        assert!(matches!(p.decision, Decision::Run { .. }));
    }

    #[test]
    fn idle_reasons() {
        let views = account_views(&cfg(), &[], &BTreeMap::new(), t(NOW));
        let p = plan(&[], &views, None, t(NOW));
        assert_eq!(
            p.decision,
            Decision::Idle {
                reason: "the queue is empty".into()
            }
        );
        let mut done = job("d", 0, None);
        done.state = JobState::Done;
        assert!(plan(&[done], &views, None, t(NOW)).queue.is_empty());
    }

    #[test]
    fn outside_the_schedule_window_nothing_starts() {
        let views = account_views(&cfg(), &[], &BTreeMap::new(), t(NOW));
        let night = TimeWindow {
            start: chrono::NaiveTime::from_hms_opt(22, 0, 0).unwrap(),
            end: chrono::NaiveTime::from_hms_opt(7, 0, 0).unwrap(),
        };
        // The window is in local time: take local noon and local midnight.
        let local_noon = chrono::Local::now()
            .date_naive()
            .and_hms_opt(12, 0, 0)
            .unwrap()
            .and_local_timezone(chrono::Local)
            .unwrap()
            .with_timezone(&Utc);
        let p = plan(&[job("a", 0, None)], &views, Some(night), local_noon);
        assert_eq!(
            p.decision,
            Decision::Idle {
                reason: "it is outside the schedule window 22:00-07:00".into()
            }
        );
        assert_eq!(
            p.queue[0].reason,
            "ready, but outside the schedule window 22:00-07:00"
        );
        let local_midnight = local_noon + chrono::Duration::hours(12);
        let p = plan(&[job("a", 0, None)], &views, Some(night), local_midnight);
        assert!(matches!(p.decision, Decision::Run { .. }));
    }

    /// What the store counts of these Jobs, as `Store::count_queue` groups them (each Job
    /// a group of its own: the sums are the same).
    fn counted(jobs: &[PlanJob]) -> QueueCount {
        let open = jobs.iter().filter(|j| !j.state.is_finished());
        let (running, open): (Vec<&PlanJob>, Vec<&PlanJob>) =
            open.partition(|j| j.state == JobState::Running);
        QueueCount {
            groups: open
                .into_iter()
                .map(|j| QueueGroup {
                    account: j.account.clone(),
                    state: j.state,
                    not_before: j.not_before,
                    elsewhere: j.elsewhere.is_some(),
                    after: j.after.iter().any(|(_, s)| *s != JobState::Done),
                    count: 1,
                })
                .collect(),
            running: running.into_iter().map(|j| j.id.clone()).collect(),
        }
    }

    #[test]
    fn behind_held_accounts_the_counts_say_what_the_whole_plan_says() {
        let cfg = config::parse(
            "accounts:\n  work:\n    limits: {fiveHourMax: 60}\n  home:\n    limits: {fiveHourMax: 60}\n",
            "x",
        )
        .unwrap();
        let snaps = [
            snap("work", "five_hour", 70.0, "2026-11-30T05:00:00Z"),
            snap("home", "five_hour", 80.0, "2026-11-30T04:00:00Z"),
        ];
        let now = t(NOW);
        let views = account_views(&cfg, &snaps, &BTreeMap::new(), now);
        assert!(views.iter().all(|v| !v.schedulable), "{views:#?}");
        let pj = |id: &str, account: Option<&str>, state: JobState| {
            let mut j = PlanJob::from(&job(id, 0, account));
            j.state = state;
            j
        };
        let waiting_until = |id: &str, account: Option<&str>, at: &str| {
            let mut j = pj(id, account, JobState::Waiting);
            j.not_before = Some(t(at));
            j
        };
        let mut after = pj("after", None, JobState::Queued);
        after.after = vec![("a".into(), JobState::Queued)];
        let mut elsewhere = pj("there", Some("work"), JobState::Queued);
        elsewhere.elsewhere = Some("runs on machine build".into());
        let said_by_counts = [
            vec![],
            vec![pj("a", None, JobState::Queued)],
            vec![
                pj("a", Some("work"), JobState::Queued),
                pj("b", Some("work"), JobState::Queued),
                pj("c", None, JobState::Queued),
                elsewhere.clone(),
            ],
            vec![
                waiting_until("w", Some("work"), "2026-11-30T05:00:00Z"),
                pj("h", Some("home"), JobState::Queued),
                after.clone(),
            ],
            vec![pj("r", Some("work"), JobState::Running)],
            vec![
                pj("r", Some("work"), JobState::Running),
                pj("a", Some("home"), JobState::Queued),
            ],
        ];
        for jobs in &said_by_counts {
            let whole = super::plan(jobs, &views, None, now);
            let counts = held_decision(&counted(jobs), &views, None, now);
            assert_eq!(counts, Some(whole.decision), "{jobs:#?}");
        }
        // Only the Jobs can say these: each waits for another Job, or for a time.
        let said_by_jobs = [
            vec![after],
            vec![waiting_until("w", None, "2026-11-30T06:00:00Z")],
            vec![elsewhere],
        ];
        for jobs in &said_by_jobs {
            assert_eq!(held_decision(&counted(jobs), &views, None, now), None);
        }
        // An Account that can start a Run: the whole plan decides.
        let free = config::parse("accounts:\n  free: {}\n", "x").unwrap();
        let views = account_views(&free, &[], &BTreeMap::new(), now);
        let jobs = [pj("a", None, JobState::Queued)];
        assert_eq!(held_decision(&counted(&jobs), &views, None, now), None);
    }

    #[test]
    fn float_noise_is_not_printed() {
        assert_eq!(fmt_percent(55.00000000000001), "55");
        assert_eq!(fmt_percent(62.46), "62.5");
    }
}

//! `owl report`: the night at a glance — every Job a Run touched, and each Account's utilization across the period against its ceiling, with the Runs' spans and stops; as text, JSON or one self-contained HTML page.

mod by_hour;
mod chart;
mod html;
mod text;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Local, Utc};
use serde::Serialize;

use super::{print_json, Ctx};
use crate::model::{JobState, PermissionDenial, Run, StopKind};

/// What `owl report` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The period: this long before now (`8h`, `2d`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "night")]
    pub(crate) since: Option<Duration>,
    /// The period: since the latest `schedule.window` began (the default with one).
    #[arg(long)]
    pub(crate) night: bool,
    /// The same data as JSON (the chart as its series of Snapshots).
    #[arg(long)]
    pub(crate) json: bool,
    /// Write one self-contained HTML page (inline SVG and CSS) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,
}

/// A duration as config.yaml writes them (`90s`, `8h`, `2d`).
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s).map_err(|e| e.to_string())
}

/// Everything a report shows: the JSON, and what the text and the page are drawn from.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) since: DateTime<Utc>,
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) until: DateTime<Utc>,
    pub(crate) jobs: Vec<JobReport>,
    pub(crate) accounts: Vec<AccountReport>,
    /// One sentence: how many Runs, Jobs done, blocked, failed, waiting.
    pub(crate) summary: String,
}

#[derive(Debug, Serialize)]
pub(super) struct JobReport {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) state: String,
    pub(crate) reason: Option<String>,
    pub(crate) branch: String,
    pub(crate) commits: Option<usize>,
    pub(crate) files_changed: Option<usize>,
    pub(crate) insertions: Option<usize>,
    pub(crate) deletions: Option<usize>,
    /// What all the Job's Runs cost; a Run without a result counts its cap.
    pub(crate) cost_usd: f64,
    /// `maxJobBudgetUsd` less what was spent; `null` without a Job budget.
    pub(crate) budget_left_usd: Option<f64>,
    pub(crate) denied_tools: Vec<PermissionDenial>,
    /// The Handoff's words after its status line, first line: what the agent will do next,
    /// or what it needs.
    pub(crate) next_step: Option<String>,
    pub(crate) runs: Vec<RunReport>,
    /// The check the Job's work must pass to be done (argv); `null`: the agent's word.
    pub(crate) check: Option<Vec<String>>,
    /// Done, and its check passed: verified, not only claimed.
    pub(crate) verified: bool,
    /// The Jobs it waits for (`add --after`).
    pub(crate) after: Vec<String>,
    /// What its Runs used of each Window, summed per Window (owl's share).
    pub(crate) owl_share: Vec<super::job_json::ShareJson>,
    /// The same in words: "used 7 pp of five_hour".
    #[serde(skip)]
    pub(crate) owl_share_said: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct RunReport {
    pub(crate) id: i64,
    pub(crate) job_id: String,
    pub(crate) account: String,
    /// `null` while it runs.
    pub(crate) outcome: Option<String>,
    pub(crate) stop_reason: Option<String>,
    /// Why owl stopped it (`ceiling`, `rate_limited`, …); `null` when it ended by itself.
    pub(crate) stop: Option<StopKind>,
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) started_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::clock::ser_opt")]
    pub(crate) ended_at: Option<DateTime<Utc>>,
    pub(crate) cost_usd: Option<f64>,
    /// What owl noted of the Run beyond its outcome: what it undid in a sandboxed Run's
    /// clone, a branch it could not bring home, a stop after the result.
    pub(crate) note: Option<String>,
    /// The Job's check after the Run, when the agent said done and the Job has one.
    pub(crate) check: Option<crate::notify::PayloadCheck>,
    /// How the check ended, in words.
    #[serde(skip)]
    pub(crate) check_said: Option<String>,
    /// The machine that ran it; `null` for a Run from before machines.
    pub(crate) machine: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct AccountReport {
    pub(crate) name: String,
    pub(crate) windows: Vec<WindowSeries>,
    /// Of each Window's instance open at the period's end: what owl used, and the rest.
    pub(crate) owl_share: Vec<AccountShare>,
    /// With a morning configured: the night ceiling, drawn on the page, and each night
    /// that meets the period, `(from the day's end, to the morning)`.
    #[serde(skip)]
    pub(crate) night: Option<(f64, Vec<Night>)>,
    pub(crate) runs: Vec<RunReport>,
    /// Your use and owl's of the week, by hour, where observed.
    pub(crate) by_hour: Vec<by_hour::HourUse>,
}

/// One night, from the day's end to the morning.
pub(super) type Night = (DateTime<Utc>, DateTime<Utc>);

/// owl's share of a Window instance, beside its newest figure: the rest was the user's.
#[derive(Debug, Serialize)]
pub(super) struct AccountShare {
    pub(crate) window: String,
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) resets_at: DateTime<Utc>,
    /// Its newest figure in the period.
    pub(crate) percent: f64,
    /// Percentage points owl's Runs used of it (the user's concurrent use counted as owl's).
    pub(crate) points: f64,
    /// A Run never saw the figure from before it: `points` is at most what owl used.
    pub(crate) upper_bound: bool,
}

/// One Window's utilization over the period: the Snapshots, in order, and its ceiling.
#[derive(Debug, Serialize)]
pub(super) struct WindowSeries {
    pub(crate) window: String,
    pub(crate) ceiling: Option<f64>,
    pub(crate) snapshots: Vec<Point>,
    /// The resets that fell inside the period.
    #[serde(serialize_with = "crate::clock::ser_vec")]
    pub(crate) resets: Vec<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Point {
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) observed_at: DateTime<Utc>,
    pub(crate) percent: f64,
    pub(crate) source: crate::model::SnapshotSource,
    pub(crate) run_id: Option<i64>,
}

pub(super) fn run(ctx: &Ctx, args: &ReportArgs) -> Result<u8> {
    if args.night && ctx.config.schedule.window.is_none() {
        return Err(crate::error::Error::bad_input(format!(
            "--night needs schedule.window in {} (the night is the window); use --since",
            ctx.config.source
        ))
        .into());
    }
    if let Some(path) = &args.html {
        check_html_path(path)?;
    }
    let now = crate::clock::now()?;
    let since = period_start(ctx, args, now)?;
    let report = match ctx.read_store()? {
        Some(store) => gather(ctx, &store, since, now)?,
        None => empty(ctx, since, now),
    };
    if let Some(path) = &args.html {
        let page = html::page(&report, Local::now().offset());
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
        if !args.json {
            outln!("wrote {}", path.display());
        }
    }
    if args.json {
        print_json(&report)?;
    } else if args.html.is_none() {
        text::print_text(&report);
    }
    Ok(0)
}

/// Where the period starts: `--since`, else the start of the latest `schedule.window` that
/// has begun (`--night` and the default), else 12 hours ago.
fn period_start(ctx: &Ctx, args: &ReportArgs, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    if let Some(d) = args.since {
        let start = chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_sub_signed(d));
        return match start {
            Some(start) => Ok(start),
            None => Err(crate::error::Error::bad_input(format!(
                "--since reaches {} days back, before any date owl can name",
                d.as_secs() / 86_400
            ))
            .into()),
        };
    }
    let twelve_hours = now - chrono::Duration::hours(12);
    let Some(window) = ctx.config.schedule.window else {
        return Ok(twelve_hours);
    };
    let local = now.with_timezone(&Local);
    // Today's start if it has come, else yesterday's.
    let today = local.date_naive().and_time(window.start);
    let start = if today <= local.naive_local() {
        today
    } else {
        today - chrono::Duration::days(1)
    };
    Ok(start
        .and_local_timezone(Local)
        .earliest()
        .map_or(twelve_hours, |t| t.with_timezone(&Utc)))
}

/// `--html FILE` names a file in a directory that exists: checked before anything is read,
/// so a typo is bad usage (exit 2), not a failure after the work.
fn check_html_path(path: &std::path::Path) -> Result<()> {
    if path.is_dir() {
        crate::bad_input!(
            "--html {} is a directory; name the page's file (say {}/owl-report.html)",
            path.display(),
            path.display()
        );
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = parent.filter(|d| !d.is_dir()) {
        crate::bad_input!(
            "--html {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

fn empty(ctx: &Ctx, since: DateTime<Utc>, until: DateTime<Utc>) -> Report {
    // Each Account still, with the ceilings it will be held to: the first night's page.
    let accounts = ctx
        .config
        .accounts
        .iter()
        .map(|(name, account)| AccountReport {
            name: name.clone(),
            windows: configured_windows(account.limits.as_ref())
                .into_iter()
                .map(|window| WindowSeries {
                    ceiling: crate::schedule::ceiling_for(window, account.limits.as_ref())
                        .map(|(_, c)| c),
                    window: window.to_string(),
                    snapshots: Vec::new(),
                    resets: Vec::new(),
                })
                .collect(),
            owl_share: Vec::new(),
            night: None,
            runs: Vec::new(),
            by_hour: Vec::new(),
        })
        .collect();
    Report {
        since,
        until,
        jobs: Vec::new(),
        accounts,
        summary: "nothing ran: no database yet".into(),
    }
}

fn gather(
    ctx: &Ctx,
    store: &crate::store::Store,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Report> {
    let runs = store.runs_touching(since, until)?;
    let mut by_job: BTreeMap<String, Vec<&Run>> = BTreeMap::new();
    for r in &runs {
        by_job.entry(r.job_id.clone()).or_default().push(r);
    }
    // Where each unfinished Job stands now, in the words of status: a queued Job's reason.
    let (_, plan) = super::plan::make_plan(ctx, store, until)?;
    // The Jobs that did not run in the period and wait still: listed with why.
    let waiting_jobs = store.jobs_in(&[JobState::Queued, JobState::Waiting])?;
    let ids: Vec<String> = by_job
        .keys()
        .cloned()
        .chain(
            waiting_jobs
                .iter()
                .map(|j| j.id.clone())
                .filter(|id| !by_job.contains_key(id)),
        )
        .collect();
    let mut jobs = Vec::new();
    let mut states = Vec::new();
    for id in &ids {
        let Some(job) = store.job(id)? else { continue };
        let job_runs = by_job.get(id).map_or(&[][..], Vec::as_slice);
        states.push(job.state);
        jobs.push(job_report(store, &plan, &job, job_runs)?);
    }
    let mut accounts = Vec::new();
    for (name, account) in &ctx.config.accounts {
        let mut report = account_report(store, name, account, &runs, since, until)?;
        report.night = night_of(ctx, account, since, until);
        accounts.push(report);
    }
    Ok(Report {
        since,
        until,
        summary: summary(runs.len(), by_job.len(), &states),
        jobs,
        accounts,
    })
}

/// One Job the night touched, or that waits still: its state and why, its branch, its
/// spend, what was denied and its Handoff's next step, with its Runs in the period.
fn job_report(
    store: &crate::store::Store,
    plan: &crate::schedule::Plan,
    job: &crate::model::Job,
    job_runs: &[&Run],
) -> Result<JobReport> {
    let all_runs = store.runs_of(&job.id)?;
    let cost = crate::model::total_cost(&all_runs);
    let summary = crate::workspace::branch_summary(job, &all_runs)
        .ok()
        .flatten();
    let shares = store.job_shares(&job.id)?;
    Ok(JobReport {
        owl_share: super::job_json::ShareJson::summed(&shares),
        owl_share_said: crate::model::describe_shares(&shares),
        id: job.id.clone(),
        name: job.name.clone(),
        state: job.state.to_string(),
        reason: plan
            .stands(&job.id)
            .map(String::from)
            .or_else(|| job.reason.as_ref().map(|r| r.to_string())),
        branch: job.branch(),
        commits: summary.as_ref().map(|s| s.commits),
        files_changed: summary.as_ref().map(|s| s.files_changed),
        insertions: summary.as_ref().map(|s| s.insertions),
        deletions: summary.as_ref().map(|s| s.deletions),
        cost_usd: cost,
        budget_left_usd: job.max_job_budget_usd.map(|b| b - cost),
        denied_tools: job_runs
            .iter()
            .flat_map(|r| r.permission_denials.iter().cloned())
            .collect(),
        next_step: next_step(job),
        runs: job_runs.iter().map(|r| run_report(r)).collect(),
        check: job.check.as_ref().map(|c| c.argv.clone()),
        after: job.after.clone(),
        verified: job.state == crate::model::JobState::Done
            && all_runs
                .iter()
                .rev()
                .find_map(|r| r.check.as_ref())
                .is_some_and(|c| c.passed()),
    })
}

/// The first line of the Job's Handoff body: what the agent said comes next.
fn next_step(job: &crate::model::Job) -> Option<String> {
    crate::workspace::read_handoff(job)
        .ok()
        .flatten()
        .and_then(|text| crate::handoff::Handoff::parse(&text).ok())
        .and_then(|h| {
            h.body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(String::from)
        })
}

/// The Account's night ceiling and the nights that meet `since` to `until` (each from the
/// day's end to its morning), with a morning configured and a ceiling for the night's to
/// raise.
fn night_of(
    ctx: &Ctx,
    account: &crate::config::Account,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<(f64, Vec<Night>)> {
    let day = crate::morning::Day::of(&ctx.config, account)?;
    account.limits.as_ref().filter(|l| l.any_ceiling())?;
    let mut nights = Vec::new();
    let mut morning = day.following_morning(since, &chrono::Local);
    loop {
        let starts = day.night_before(morning, &chrono::Local);
        if starts >= until {
            break;
        }
        nights.push((starts, morning));
        morning = day.following_morning(morning + chrono::Duration::minutes(1), &chrono::Local);
    }
    Some((crate::morning::night_max(account.limits.as_ref()), nights))
}

/// One Account: each Window's figures in the period against its ceiling (a configured
/// ceiling is drawn even before any figure was observed under it), and its Runs.
fn account_report(
    store: &crate::store::Store,
    name: &str,
    account: &crate::config::Account,
    runs: &[Run],
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<AccountReport> {
    let mut names = store.windows_of(name)?;
    for configured in configured_windows(account.limits.as_ref()) {
        if !names.iter().any(|w| w == configured) {
            names.push(configured.to_string());
        }
    }
    let mut windows = Vec::new();
    let mut owl_share = Vec::new();
    for window in names {
        let snapshots = store.snapshots_between(name, &window, since, until)?;
        if let Some((last, resets_at)) = snapshots.last().and_then(|s| Some((s, s.resets_at?))) {
            let (points, upper_bound) = store.instance_share(name, &window, resets_at)?;
            if points > 0.0 || upper_bound {
                owl_share.push(AccountShare {
                    window: window.clone(),
                    resets_at,
                    percent: last.percent,
                    points,
                    upper_bound,
                });
            }
        }
        let mut resets: Vec<DateTime<Utc>> = snapshots
            .iter()
            .filter_map(|s| s.resets_at)
            .filter(|t| *t >= since && *t <= until)
            .collect();
        resets.dedup();
        windows.push(WindowSeries {
            ceiling: crate::schedule::ceiling_for(&window, account.limits.as_ref()).map(|(_, c)| c),
            window,
            snapshots: snapshots
                .iter()
                .map(|s| Point {
                    observed_at: s.observed_at,
                    percent: s.percent,
                    source: s.source,
                    run_id: s.run_id,
                })
                .collect(),
            resets,
        });
    }
    Ok(AccountReport {
        name: name.to_string(),
        windows,
        owl_share,
        night: None,
        runs: runs
            .iter()
            .filter(|r| r.account == name)
            .map(run_report)
            .collect(),
        by_hour: by_hour::of(store, name, (since, until))?,
    })
}

/// The night in one line, counted from the Jobs' states (not their words).
fn summary(runs: usize, ran: usize, states: &[JobState]) -> String {
    let count = |wanted: &[JobState]| states.iter().filter(|s| wanted.contains(s)).count();
    // Waiting: every Job listed that has yet to run again, queued or waiting.
    // The Jobs' ends, then the queue: two counts, not one breath.
    let waiting = count(&[JobState::Waiting, JobState::Queued]);
    format!(
        "{} Run{} on {} Job{}; {} done, {} blocked, {} failed; {} {} to run",
        runs,
        if runs == 1 { "" } else { "s" },
        ran,
        if ran == 1 { "" } else { "s" },
        count(&[JobState::Done]),
        count(&[JobState::Blocked]),
        count(&[JobState::Failed]),
        waiting,
        if waiting == 1 {
            "Job waits"
        } else {
            "Jobs wait"
        },
    )
}

fn run_report(r: &Run) -> RunReport {
    RunReport {
        id: r.id,
        job_id: r.job_id.clone(),
        account: r.account.clone(),
        outcome: r.outcome.map(|o| o.to_string()),
        stop_reason: r.stop_reason.clone(),
        stop: r.stop,
        started_at: r.started_at,
        ended_at: r.ended_at,
        cost_usd: r.cost_usd,
        note: r.note.clone(),
        check: r.check.as_ref().map(crate::notify::PayloadCheck::of),
        check_said: r.check.as_ref().map(|c| c.to_string()),
        machine: r.machine.clone(),
    }
}

/// The Windows an Account's limits put a ceiling on by name (a per-model week is named
/// only once observed).
fn configured_windows(limits: Option<&crate::config::Limits>) -> Vec<&'static str> {
    let Some(limits) = limits else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if limits.five_hour_max.is_some() {
        names.push("five_hour");
    }
    if limits.weekly_max.is_some() {
        names.push("seven_day");
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_period_starts_at_the_latest_window_start() {
        let cfg = crate::config::parse(
            "schedule:\n  window: \"22:00-06:00\"\naccounts:\n  work: {}\n",
            "x.yaml",
        )
        .unwrap();
        let ctx = Ctx {
            config: cfg,
            reserves: Default::default(),
        };
        let args = ReportArgs {
            since: None,
            night: false,
            json: true,
            html: None,
        };
        let now = Local::now();
        let start = period_start(&ctx, &args, now.with_timezone(&Utc))
            .unwrap()
            .with_timezone(&Local);
        assert_eq!(start.format("%H:%M").to_string(), "22:00");
        assert!(now.naive_local() - start.naive_local() < chrono::Duration::days(1));
        let args = ReportArgs {
            since: Some(Duration::from_secs(3600)),
            ..args
        };
        let start = period_start(&ctx, &args, now.with_timezone(&Utc)).unwrap();
        assert_eq!((now.with_timezone(&Utc) - start).num_minutes(), 60);
        // A period past what a date can name is refused, never replaced.
        let args = ReportArgs {
            since: Some(Duration::from_secs(100_000_000 * 86_400)),
            ..args
        };
        assert!(period_start(&ctx, &args, now.with_timezone(&Utc)).is_err());
    }
}

//! owl's own share of each Window instance (a Window and its reset): per Run, the figure before it and the highest during it, kept when the Run settles; summed per Job, per Account and per instance.

use super::engine::{params, Db, Row};
use anyhow::Result;
use chrono::{DateTime, Utc};

use super::{time_col, Store};
use crate::clock::rfc3339;
use crate::model::{same_reset, RunShare, WindowKind, SAME_RESET};

impl Store {
    /// Keeps what Run `run_id` used of each Window instance it saw a figure of: the
    /// newest figure of that instance from before the Run (by any Run or probe), else 0 for
    /// an instance the Run opened, else unknown (the share is then an upper bound); and the
    /// highest figure during it. Idempotent: a settlement tried again writes the same rows.
    pub(crate) fn record_shares(&mut self, run_id: i64) -> Result<()> {
        self.write(|tx| {
            let Some((account, started)) = tx.query_opt(
                "SELECT account, started_at FROM runs WHERE id = ?1",
                params![run_id],
                |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
            )?
            else {
                return Ok(());
            };
            let Some(started) = crate::clock::parse(&started) else {
                return Ok(());
            };
            let seen: Vec<(String, String, f64)> = tx.query_map(
                "SELECT \"window\", resets_at, MAX(percent) FROM snapshots \
                 WHERE run_id = ?1 AND resets_at IS NOT NULL GROUP BY \"window\", resets_at \
                 ORDER BY \"window\", resets_at",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            let seen = seen
                .into_iter()
                .filter_map(|(window, reset, peak)| Some((window, time_col(Some(reset))?, peak)))
                .collect();
            for (window, reset, peak) in instances(seen) {
                let (baseline, known) =
                    baseline_in(tx, run_id, (&account, &window), reset, started)?;
                tx.execute(
                    "INSERT INTO run_windows \
                     (run_id, account, \"window\", resets_at, baseline, baseline_known, peak) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                     ON CONFLICT (run_id, \"window\", resets_at) DO UPDATE SET \
                     account = excluded.account, baseline = excluded.baseline, \
                     baseline_known = excluded.baseline_known, peak = excluded.peak",
                    params![
                        run_id,
                        account,
                        window,
                        rfc3339(reset),
                        baseline,
                        known,
                        peak
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// The figure Run `run_id` started from on the Window instance `window` resetting at
    /// `reset`, and whether it is known (see [`Store::record_shares`]): for the owl-share
    /// cap while the Run goes on.
    pub(crate) fn run_baseline(
        &self,
        run_id: i64,
        window: &str,
        reset: DateTime<Utc>,
    ) -> Result<(f64, bool)> {
        let (account, started): (String, String) = self.db.query_one(
            "SELECT account, started_at FROM runs WHERE id = ?1",
            params![run_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let started = crate::clock::parse(&started).unwrap_or(reset);
        baseline_in(&self.db, run_id, (&account, window), reset, started)
    }

    /// Every Run's shares, by Job, oldest Run first: what `jobs --json` sums per Job.
    pub(crate) fn shares_by_job(&self) -> Result<std::collections::HashMap<String, Vec<RunShare>>> {
        let mut by_job: std::collections::HashMap<String, Vec<RunShare>> = Default::default();
        self.db.for_each(
            "SELECT w.run_id, w.\"window\", w.resets_at, w.baseline, w.baseline_known, w.peak, \
             r.job_id FROM run_windows w JOIN runs r ON r.id = w.run_id \
             ORDER BY w.run_id, w.\"window\", w.resets_at",
            params![],
            |r| {
                if let Some(share) = share_from_row(r)? {
                    by_job.entry(r.get(6)?).or_default().push(share);
                }
                Ok(())
            },
        )?;
        Ok(by_job)
    }

    /// The shares of every Run of Job `job_id`, oldest Run first.
    pub(crate) fn job_shares(&self, job_id: &str) -> Result<Vec<RunShare>> {
        let rows = self.db.query_map(
            "SELECT w.run_id, w.\"window\", w.resets_at, w.baseline, w.baseline_known, w.peak \
             FROM run_windows w JOIN runs r ON r.id = w.run_id WHERE r.job_id = ?1 \
             ORDER BY w.run_id, w.\"window\", w.resets_at",
            params![job_id],
            share_from_row,
        )?;
        Ok(rows.into_iter().flatten().collect())
    }
}

impl Store {
    /// owl's share of one Window instance of `account`: the points every Run used of it,
    /// summed, and whether any of them is an upper bound.
    pub(crate) fn instance_share(
        &self,
        account: &str,
        window: &str,
        resets_at: DateTime<Utc>,
    ) -> Result<(f64, bool)> {
        let (points, known): (f64, bool) = self.db.query_one(
            "SELECT COALESCE(SUM(CASE WHEN peak > baseline THEN peak - baseline ELSE 0 END), 0.0), \
             COALESCE(MIN(baseline_known), 1) \
             FROM run_windows WHERE account = ?1 AND \"window\" = ?2 \
             AND resets_at BETWEEN ?3 AND ?4",
            params![
                account,
                window,
                rfc3339(resets_at - SAME_RESET),
                rfc3339(resets_at + SAME_RESET)
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((crate::model::round_percent(points), !known))
    }
}

fn share_from_row(r: &Row) -> Result<Option<RunShare>> {
    let reset: String = r.get(2)?;
    Ok(time_col(Some(reset)).map(|resets_at| RunShare {
        run_id: r.get(0).unwrap_or_default(),
        window: r.get(1).unwrap_or_default(),
        resets_at,
        baseline: r.get(3).unwrap_or_default(),
        baseline_known: r.get(4).unwrap_or_default(),
        peak: r.get(5).unwrap_or_default(),
    }))
}

/// The newest figure of one Window instance from before Run `run_id` started (by any Run
/// or probe, never the Run's own), else what [`baseline_of`] makes of its absence.
fn baseline_in(
    db: &Db,
    run_id: i64,
    (account, window): (&str, &str),
    reset: DateTime<Utc>,
    started: DateTime<Utc>,
) -> Result<(f64, bool)> {
    let seen: Option<f64> = db.query_opt(
        "SELECT percent FROM snapshots WHERE account = ?1 AND \"window\" = ?2 \
         AND resets_at BETWEEN ?3 AND ?4 AND observed_at <= ?5 \
         AND (run_id IS NULL OR run_id != ?6) \
         ORDER BY observed_at DESC, id DESC LIMIT 1",
        params![
            account,
            window,
            rfc3339(reset - SAME_RESET),
            rfc3339(reset + SAME_RESET),
            rfc3339(started),
            run_id
        ],
        |r| r.get(0),
    )?;
    Ok(baseline_of(seen, window, reset, started))
}

/// The Window instances among a Run's figures (window, reset, highest figure), figures whose
/// resets lie within [`SAME_RESET`] of each other counted as one instance.
fn instances(seen: Vec<(String, DateTime<Utc>, f64)>) -> Vec<(String, DateTime<Utc>, f64)> {
    let mut out: Vec<(String, DateTime<Utc>, f64)> = Vec::new();
    for (window, reset, peak) in seen {
        match out
            .iter_mut()
            .find(|(w, r, _)| *w == window && same_reset(*r, reset))
        {
            Some(same) => same.2 = same.2.max(peak),
            None => out.push((window, reset, peak)),
        }
    }
    out
}

/// The figure a Run started from on one Window instance, and whether it is known: the
/// newest figure from before the Run; 0 for an instance the Run opened (its window began
/// after the Run did); else unknown, counted as 0, so the share is an upper bound.
fn baseline_of(
    before: Option<f64>,
    window: &str,
    reset: DateTime<Utc>,
    started: DateTime<Utc>,
) -> (f64, bool) {
    match before {
        Some(p) => (p, true),
        None => {
            let opened = reset - WindowKind::of(window).length() + SAME_RESET >= started;
            (0.0, opened)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn figures_of_one_reset_are_one_instance_and_a_new_reset_another() {
        let got = instances(vec![
            ("five_hour".into(), at("2026-11-30T05:00:00Z"), 70.0),
            ("five_hour".into(), at("2026-11-30T05:00:01Z"), 72.0),
            ("five_hour".into(), at("2026-11-30T10:00:00Z"), 4.0),
        ]);
        assert_eq!(
            got,
            vec![
                ("five_hour".into(), at("2026-11-30T05:00:00Z"), 72.0),
                ("five_hour".into(), at("2026-11-30T10:00:00Z"), 4.0),
            ]
        );
    }

    #[test]
    fn an_instance_the_run_opened_starts_at_zero_and_one_unseen_before_is_unknown() {
        let started = at("2026-11-30T03:00:00Z");
        assert_eq!(
            baseline_of(Some(40.0), "five_hour", at("2026-11-30T05:00:00Z"), started),
            (40.0, true)
        );
        // Opened at 03:00 by the Run itself: it resets at 08:00.
        assert_eq!(
            baseline_of(None, "five_hour", at("2026-11-30T08:00:00Z"), started),
            (0.0, true)
        );
        // Open since 00:00, never seen before the Run: unknown.
        assert_eq!(
            baseline_of(None, "five_hour", at("2026-11-30T05:00:00Z"), started),
            (0.0, false)
        );
    }
}

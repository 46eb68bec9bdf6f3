//! The user's own use by hour: each Account's new figures of its five-hour and weekly Windows folded in at each tick (`crate::user_use`), kept for `userUseRetention`, read back for what was learned.

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::engine::{params, Db};
use super::{time_col, Store};
use crate::clock::rfc3339;
use crate::model::WindowKind;
use crate::user_use::{Figure, UserLimited, OWLS};

/// A Run's start, and its end (`None`: live).
type RunSpan = (DateTime<Utc>, Option<DateTime<Utc>>);

/// The Windows whose use is learned, and the kind each is kept under.
const LEARNED: [(&str, &str); 2] = [("five_hour", "five_hour"), ("seven_day", "weekly")];

impl Store {
    /// Folds each Account's figures observed since the last fold into the user's use by
    /// hour; how many hours it touched.
    pub(crate) fn fold_user_use(
        &mut self,
        accounts: &[String],
        now: DateTime<Utc>,
    ) -> Result<usize> {
        let mut touched = 0;
        for account in accounts {
            for (window, kind) in LEARNED {
                debug_assert!(WindowKind::of(window) != WindowKind::Other);
                touched += self.fold_window(account, (window, kind), now)?;
            }
        }
        Ok(touched)
    }

    fn fold_window(
        &mut self,
        account: &str,
        (window, kind): (&str, &str),
        now: DateTime<Utc>,
    ) -> Result<usize> {
        let before = self.folded(account, window)?;
        let since = before.map_or(DateTime::<Utc>::UNIX_EPOCH, |f| f.at);
        let snapshots = self.snapshots_between(account, window, since, now)?;
        if !snapshots
            .iter()
            .any(|s| before.is_none_or(|b| s.observed_at > b.at))
        {
            return Ok(0);
        }
        let runs = self.run_spans(account, since)?;
        let figures: Vec<Figure> = snapshots
            .iter()
            .filter(|s| before.is_none_or(|b| s.observed_at > b.at))
            .scan(before.map(|b| b.at), |last, s| {
                let from = last.replace(s.observed_at);
                let owl_live = runs.iter().any(|(start, end)| {
                    from.is_none_or(|f| end.is_none_or(|e| e > f)) && *start <= s.observed_at
                });
                Some(Figure {
                    at: s.observed_at,
                    percent: s.percent,
                    resets_at: s.resets_at,
                    owl: s.run_id.is_some() || owl_live,
                })
            })
            .collect();
        let Some(last) = figures.last().copied() else {
            return Ok(0);
        };
        let hours = crate::user_use::by_hour(before.as_ref(), &figures);
        let limited = self.limited_by(account, window, &figures)?;
        self.write(|tx| {
            for limit in &limited {
                tx.execute(
                    "INSERT INTO user_limited \
                     (account, \"window\", resets_at, at, percent, owl_points) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (account, \"window\", resets_at) DO NOTHING",
                    params![
                        account,
                        window,
                        rfc3339(limit.resets_at),
                        rfc3339(limit.at),
                        limit.percent,
                        limit.owl_points
                    ],
                )?;
            }
            let owls = format!("{OWLS}{kind}");
            let sides = [(kind, &hours.users), (owls.as_str(), &hours.owls)];
            for (kind, hours) in sides {
                for (hour, points) in hours {
                    tx.execute(
                        "INSERT INTO user_use (account, kind, hour, points) \
                         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (account, kind, hour) DO UPDATE \
                         SET points = user_use.points + excluded.points",
                        params![account, kind, rfc3339(*hour), *points],
                    )?;
                }
            }
            mark(tx, account, window, &last)
        })?;
        Ok(hours.users.len() + hours.owls.len())
    }

    /// The instances among `figures` the user found full (a figure of theirs at 100%) after
    /// owl's Runs had used some of them.
    fn limited_by(
        &self,
        account: &str,
        window: &str,
        figures: &[Figure],
    ) -> Result<Vec<UserLimited>> {
        let mut out: Vec<UserLimited> = Vec::new();
        for f in figures.iter().filter(|f| !f.owl && f.percent >= 100.0) {
            let Some(reset) = f.resets_at else { continue };
            if out.iter().any(|l| l.resets_at == reset) {
                continue;
            }
            let (owl_points, _) = self.instance_share(account, window, reset)?;
            if owl_points > 0.0 {
                out.push(UserLimited {
                    window: window.to_string(),
                    resets_at: reset,
                    at: f.at,
                    percent: f.percent,
                    owl_points,
                });
            }
        }
        Ok(out)
    }

    /// The Window instances the user was limited by after owl's Runs used them, seen full
    /// from `since` on, oldest first.
    pub(crate) fn user_limited_since(
        &self,
        account: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<UserLimited>> {
        self.db.query_map(
            "SELECT \"window\", resets_at, at, percent, owl_points FROM user_limited \
             WHERE account = ?1 AND at >= ?2 ORDER BY at",
            params![account, rfc3339(since)],
            |r| {
                Ok(UserLimited {
                    window: r.get(0)?,
                    resets_at: time_col(r.get(1)?).unwrap_or_default(),
                    at: time_col(r.get(2)?).unwrap_or_default(),
                    percent: r.get(3)?,
                    owl_points: r.get(4)?,
                })
            },
        )
    }

    /// The last figure of a Window folded in already.
    fn folded(&self, account: &str, window: &str) -> Result<Option<Figure>> {
        self.db.query_opt(
            "SELECT observed_at, percent, resets_at FROM user_use_folded \
             WHERE account = ?1 AND \"window\" = ?2",
            params![account, window],
            |r| {
                Ok(Figure {
                    at: time_col(r.get(0)?).unwrap_or_default(),
                    percent: r.get(1)?,
                    resets_at: time_col(r.get(2)?),
                    owl: false,
                })
            },
        )
    }

    /// The spans of the Account's Runs that ended after `since` or run still.
    fn run_spans(&self, account: &str, since: DateTime<Utc>) -> Result<Vec<RunSpan>> {
        self.db.query_map(
            "SELECT started_at, ended_at FROM runs WHERE account = ?1 \
             AND (ended_at IS NULL OR ended_at > ?2)",
            params![account, rfc3339(since)],
            |r| Ok((time_col(r.get(0)?).unwrap_or_default(), time_col(r.get(1)?))),
        )
    }

    /// The user's use of an Account's Window kind in each observed hour from `since` on,
    /// oldest first.
    pub(crate) fn user_use_since(
        &self,
        account: &str,
        kind: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(DateTime<Utc>, f64)>> {
        self.db.query_map(
            "SELECT hour, points FROM user_use WHERE account = ?1 AND kind = ?2 \
             AND hour >= ?3 ORDER BY hour",
            params![account, kind, rfc3339(since)],
            |r| Ok((time_col(r.get(0)?).unwrap_or_default(), r.get(1)?)),
        )
    }

    /// Deletes the hours of use older than `before`; how many went.
    pub(crate) fn prune_user_use(&mut self, before: DateTime<Utc>) -> Result<usize> {
        let any = self.db.exists(
            "SELECT 1 FROM user_use WHERE hour < ?1 LIMIT 1",
            params![rfc3339(before)],
        )?;
        if !any {
            return Ok(0);
        }
        self.write(|tx| {
            tx.execute(
                "DELETE FROM user_limited WHERE at < ?1",
                params![rfc3339(before)],
            )?;
            tx.execute(
                "DELETE FROM user_use WHERE hour < ?1",
                params![rfc3339(before)],
            )
        })
    }
}

/// Records `last` as the Window's last figure folded in.
fn mark(tx: &Db, account: &str, window: &str, last: &Figure) -> Result<()> {
    tx.execute(
        "INSERT INTO user_use_folded (account, \"window\", observed_at, percent, resets_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (account, \"window\") DO UPDATE \
         SET observed_at = excluded.observed_at, percent = excluded.percent, \
         resets_at = excluded.resets_at",
        params![
            account,
            window,
            rfc3339(last.at),
            last.percent,
            last.resets_at.map(rfc3339)
        ],
    )?;
    Ok(())
}

//! Conformance verdicts: whether an agent CLI binary (by its identity) passed the check.

use anyhow::Result;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};

use super::{time_col, Store};
use crate::clock::rfc3339;

/// What the conformance check said of one binary.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub version: String,
    pub passed: bool,
    /// The names of the checks that failed.
    pub failed: Vec<String>,
    pub checked_at: DateTime<Utc>,
}

impl Store {
    /// The verdict on the binary with this identity, if it was ever checked.
    pub fn verdict(&self, identity: &str) -> Result<Option<Verdict>> {
        Ok(self
            .conn
            .query_row(
                "SELECT version, passed, failed, checked_at FROM agent_verdicts \
                 WHERE identity = ?1",
                [identity],
                |r| {
                    Ok(Verdict {
                        version: r.get(0)?,
                        passed: r.get(1)?,
                        failed: super::parse_json_vec(
                            &r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        ),
                        checked_at: time_col(r.get(3)?).unwrap_or_default(),
                    })
                },
            )
            .optional()?)
    }

    /// Records the verdict on a binary, replacing any earlier one.
    pub fn set_verdict(&mut self, identity: &str, verdict: &Verdict) -> Result<()> {
        let failed = serde_json::to_string(&verdict.failed)?;
        self.write(|tx| {
            tx.execute(
                "INSERT INTO agent_verdicts (identity, version, passed, failed, checked_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(identity) DO UPDATE SET \
                 version = ?2, passed = ?3, failed = ?4, checked_at = ?5",
                params![
                    identity,
                    verdict.version,
                    verdict.passed,
                    failed,
                    rfc3339(verdict.checked_at)
                ],
            )?;
            Ok(())
        })
    }
}

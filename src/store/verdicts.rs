//! Conformance verdicts: whether an agent CLI binary (by its identity) at a version passed the check.

use super::engine::params;
use anyhow::Result;
use chrono::{DateTime, Utc};

use super::{time_col, Store};
use crate::clock::rfc3339;

/// What the conformance check said of one binary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) version: String,
    pub(crate) passed: bool,
    /// The names of the checks that failed.
    pub(crate) failed: Vec<String>,
    pub(crate) checked_at: DateTime<Utc>,
}

impl Store {
    /// A binary's identity as its verdict is kept: on a shared store, with the machine it
    /// is installed on (two machines' `/usr/bin/claude` are two binaries).
    fn verdict_key(&self, identity: &str) -> String {
        match self.local_machine() {
            Some(machine) => format!("{machine}\t{identity}"),
            None => identity.to_string(),
        }
    }

    /// The verdict on the binary with this identity at `version`, if that pair was ever
    /// checked.
    pub(crate) fn verdict(&self, identity: &str, version: &str) -> Result<Option<Verdict>> {
        let identity = self.verdict_key(identity);
        self.db.query_opt(
            "SELECT version, passed, failed, checked_at FROM agent_verdicts \
                 WHERE identity = ?1 AND version = ?2",
            params![identity, version],
            |r| {
                Ok(Verdict {
                    version: r.get(0)?,
                    passed: r.get(1)?,
                    failed: super::parse_json_vec(&r.get::<Option<String>>(2)?.unwrap_or_default()),
                    checked_at: time_col(r.get(3)?).unwrap_or_default(),
                })
            },
        )
    }

    /// Records the verdict on a binary at a version, replacing any earlier one for that
    /// pair; its verdicts at other versions stay.
    pub(crate) fn set_verdict(&mut self, identity: &str, verdict: &Verdict) -> Result<()> {
        let identity = self.verdict_key(identity);
        let failed = serde_json::to_string(&verdict.failed)?;
        self.write(|tx| {
            tx.execute(
                "INSERT INTO agent_verdicts (identity, version, passed, failed, checked_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(identity, version) DO UPDATE SET \
                 passed = ?3, failed = ?4, checked_at = ?5",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(version: &str, passed: bool) -> Verdict {
        Verdict {
            version: version.into(),
            passed,
            failed: if passed {
                vec![]
            } else {
                vec!["a turn".into()]
            },
            checked_at: DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        }
    }

    #[test]
    fn a_verdict_holds_for_its_pair_of_binary_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("owl.db")).unwrap();
        let wrapper = "/home/me/bin/claude 812 1790000000";
        store.set_verdict(wrapper, &verdict("2.2.0", true)).unwrap();
        store
            .set_verdict(wrapper, &verdict("2.2.1", false))
            .unwrap();
        // Checking 2.2.1 through the same wrapper did not forget 2.2.0.
        assert_eq!(
            store.verdict(wrapper, "2.2.0").unwrap(),
            Some(verdict("2.2.0", true))
        );
        assert_eq!(
            store.verdict(wrapper, "2.2.1").unwrap(),
            Some(verdict("2.2.1", false))
        );
        assert_eq!(store.verdict(wrapper, "2.2.2").unwrap(), None);
        // A second check of a pair replaces its verdict.
        store.set_verdict(wrapper, &verdict("2.2.1", true)).unwrap();
        assert!(store.verdict(wrapper, "2.2.1").unwrap().unwrap().passed);
    }
}

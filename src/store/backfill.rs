//! What a migration adds that only git knows: each earlier Run's commits, counted once when the schema that records them arrives.

use anyhow::Result;

use super::engine::params;
use super::Store;

impl Store {
    /// Counts the commits of each Run recorded before owl kept them with the Run, each
    /// repository opened once. A Run whose repository or commits are gone stays unknown.
    pub(super) fn count_earlier_commits(&mut self) -> Result<()> {
        let runs: Vec<(i64, String, String, String)> = self.db.query_map(
            "SELECT r.id, j.repo, r.head_before, r.head_after FROM runs r \
             JOIN jobs j ON j.id = r.job_id \
             WHERE r.commits IS NULL AND r.head_before IS NOT NULL \
               AND r.head_after IS NOT NULL \
             ORDER BY j.repo, r.id",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let mut counted: Vec<(i64, i64)> = Vec::new();
        for group in runs.chunk_by(|a, b| a.1 == b.1) {
            let heads: Vec<_> = group
                .iter()
                .map(|(_, _, before, after)| (Some(before.as_str()), Some(after.as_str())))
                .collect();
            let counts = crate::workspace::commits_of_runs(&group[0].1, &heads);
            for ((id, ..), n) in group.iter().zip(counts) {
                if let Some(n) = n {
                    counted.push((*id, n as i64));
                }
            }
        }
        if counted.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            for (id, n) in &counted {
                tx.execute("UPDATE runs SET commits = ?2 WHERE id = ?1", params![id, n])?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::migrations;
    use super::*;

    /// A repository whose `main` holds `n` commits after the first; their ids, oldest first.
    fn repository(path: &std::path::Path, n: usize) -> Vec<String> {
        let repo = git2::Repository::init(path).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo
            .find_tree(repo.index().unwrap().write_tree().unwrap())
            .unwrap();
        let mut ids: Vec<git2::Oid> = Vec::new();
        for i in 0..=n {
            let parents: Vec<git2::Commit> = ids
                .last()
                .map(|p| repo.find_commit(*p).unwrap())
                .into_iter()
                .collect();
            let parents: Vec<&git2::Commit> = parents.iter().collect();
            let id = repo
                .commit(Some("HEAD"), &sig, &sig, &format!("c{i}"), &tree, &parents)
                .unwrap();
            ids.push(id);
        }
        ids.iter().map(|id| id.to_string()).collect()
    }

    #[test]
    fn runs_recorded_before_their_commits_were_kept_are_counted_once_from_git() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept");
        let gone = dir.path().join("gone");
        let ids = repository(&kept, 3);
        let lost = repository(&gone, 1);
        let path = dir.path().join("owl.db");
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        migrations::migrate_to(&mut conn, migrations::COMMITS_RECORDED - 1).unwrap();
        let job = |id: &str, repo: &std::path::Path| {
            format!(
                "INSERT INTO jobs (id, prompt, repo, base, max_runs, max_run_time_secs, \
                 permission_mode, state, created_at, updated_at) VALUES ('{id}', 'p', '{}', \
                 'main', 5, 60, 'dontAsk', 'done', '2026-01-01T00:00:00Z', \
                 '2026-01-01T00:00:00Z');",
                repo.display()
            )
        };
        let run = |job: &str, before: &str, after: &str| {
            format!(
                "INSERT INTO runs (job_id, account, started_at, outcome, head_before, head_after) \
                 VALUES ('{job}', 'w', '2026-01-01T00:00:00Z', 'succeeded', '{before}', '{after}');"
            )
        };
        conn.execute_batch(
            &[
                job("a", &kept),
                job("b", &gone),
                run("a", &ids[0], &ids[1]),
                run("a", &ids[1], &ids[3]),
                run("b", &lost[0], &lost[1]),
            ]
            .concat(),
        )
        .unwrap();
        drop(conn);
        std::fs::remove_dir_all(&gone).unwrap();
        let commits = |store: &Store| -> Vec<Option<i64>> {
            store
                .db
                .query_map("SELECT commits FROM runs ORDER BY id", params![], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        let store = Store::open(&path).unwrap();
        assert_eq!(commits(&store), [Some(1), Some(2), None]);
        drop(store);
        // Counted once: a later open asks git nothing (what it would count is left alone).
        let store = Store::open(&path).unwrap();
        store
            .db
            .execute("UPDATE runs SET commits = NULL WHERE id = 1", params![])
            .unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(commits(&store), [None, Some(2), None]);
    }
}

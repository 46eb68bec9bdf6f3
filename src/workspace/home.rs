//! Bringing a sandboxed Run's branch home: from the Job's own clone into the user's repository, the objects first and the ref as a fast-forward only; and, after owl was killed doing it, what libgit2 left locked there.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use git2::Repository;

use super::Workspace;
use crate::model::Job;

impl Workspace {
    /// Brings the Job's branch from its own clone into the user's repository: the only write
    /// owl makes there. The objects come first, by a local download of that one ref that
    /// moves no ref and writes no `FETCH_HEAD`; once every object the new commits reach is there,
    /// `refs/heads/owl/<id>` moves, as a fast-forward only (or is created), and only from
    /// where it was. A branch that moved there since is left alone and named in the error,
    /// the work staying in the clone. Returns whether the branch moved.
    ///
    /// `began_at` is the branch's head when the Run began: a repository still there while the
    /// clone's branch no longer descends from it means the Run rewrote the branch's history,
    /// and the error says so rather than blame the repository. `mark` (a file of owl's state
    /// dir), when given, is in place while the objects come in: owl killed then leaves
    /// libgit2's lock files in the user's repository, and the mark tells the recovery they
    /// are owl's own ([`clear_killed_publish`]).
    pub(crate) fn publish(
        &self,
        job: &Job,
        began_at: Option<&str>,
        mark: Option<&Path>,
    ) -> Result<bool> {
        if let Some(mark) = mark {
            std::fs::write(mark, format!("{}\n", std::process::id()))
                .with_context(|| format!("writing {}", mark.display()))?;
        }
        let published = self.publish_unmarked(job, began_at);
        if let Some(mark) = mark {
            let _ = std::fs::remove_file(mark);
        }
        published
    }

    fn publish_unmarked(&self, job: &Job, began_at: Option<&str>) -> Result<bool> {
        let user = Repository::open(&job.repo)
            .with_context(|| format!("opening repository {}", job.repo))?;
        let branch = job.branch();
        let refname = format!("refs/heads/{branch}");
        let Ok(ours) = self.repo.refname_to_id(&refname) else {
            bail!(
                "the clone {} has no commit on {branch}",
                self.path.display()
            );
        };
        let theirs = user.refname_to_id(&refname).ok();
        if theirs == Some(ours) {
            return Ok(false);
        }
        let rewritten = theirs.is_some_and(|t| began_at == Some(t.to_string().as_str()));
        let moved = || {
            if rewritten {
                anyhow!(
                    "the Run rewrote {branch}'s history (its tip {ours} does not descend from \
                     {}, where the Run began and where {} still has it); not overwritten: the \
                     rewritten branch is on {branch} in {}",
                    theirs.map(|t| t.to_string()).unwrap_or_default(),
                    job.repo,
                    self.path.display()
                )
            } else {
                anyhow!(
                    "{branch} in {} moved since the Run began; not overwritten: the Run's \
                     work is on {branch} in {}",
                    job.repo,
                    self.path.display()
                )
            }
        };
        // The clone reads the user's objects, so it can tell ancestry before any fetch.
        if let Some(theirs) = theirs {
            if !self.repo.graph_descendant_of(ours, theirs)? {
                return Err(moved());
            }
        }
        let source = self.path.join(".git");
        let source = source
            .to_str()
            .ok_or_else(|| anyhow!("the clone path {} is not UTF-8", self.path.display()))?;
        // A download, not a fetch: libgit2's fetch truncates FETCH_HEAD whatever it is told.
        let mut options = git2::FetchOptions::new();
        options.download_tags(git2::AutotagOption::None);
        let mut remote = user.remote_anonymous(source)?;
        remote
            .download(&[refname.as_str()], Some(&mut options))
            .with_context(|| format!("bringing {branch} into {}", job.repo))?;
        remote.disconnect()?;
        check_connected(&user, ours, theirs)
            .with_context(|| format!("checking what {branch} brings into {}", job.repo))?;
        let message = format!("owl: {branch} from the Job's own clone");
        match theirs {
            Some(theirs) => {
                if !user.graph_descendant_of(ours, theirs)? {
                    return Err(moved());
                }
                user.reference_matching(&refname, ours, true, theirs, &message)
                    .map_err(|_| moved())?;
            }
            None => {
                user.reference(&refname, ours, false, &message)
                    .map_err(|_| moved())?;
            }
        }
        Ok(true)
    }
}

/// The Run whose work [`Workspace::bring_home`] brings home.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HomeRun<'a> {
    /// Who owl's safety-net commit is by.
    pub(crate) author: &'a str,
    pub(crate) run_id: i64,
    /// The branch's head when the Run began.
    pub(crate) began_at: Option<&'a str>,
    /// Where owl marks that it is bringing the branch home (see [`clear_killed_publish`]).
    pub(crate) mark: &'a Path,
}

/// After owl was killed while bringing a clone's branch home (its `mark` left behind): the
/// lock files libgit2 had made then in the user's repository (`shallow.lock`, the branch's
/// ref lock), which would fail every later one, are removed, but only those made since the
/// mark: a lock older than it is someone else's. The names removed.
pub(crate) fn clear_killed_publish(job: &Job, mark: &Path) -> Vec<String> {
    let Ok(since) = std::fs::metadata(mark).and_then(|m| m.modified()) else {
        return Vec::new();
    };
    let Ok(user) = Repository::open(&job.repo) else {
        return Vec::new();
    };
    let common = user.commondir().to_path_buf();
    let branch_lock = format!("refs/heads/{}.lock", job.branch());
    let removed = ["shallow.lock", branch_lock.as_str()]
        .into_iter()
        .filter(|name| {
            let path = common.join(name);
            let ours = std::fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since);
            ours && std::fs::remove_file(&path).is_ok()
        })
        .map(String::from)
        .collect();
    let _ = std::fs::remove_file(mark);
    removed
}

/// Checks that every object the commits from `tip` (back to `known`) reach is in `repo`:
/// what a fetch brought is whole before a ref points at it.
fn check_connected(repo: &Repository, tip: git2::Oid, known: Option<git2::Oid>) -> Result<()> {
    let odb = repo.odb()?;
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    if let Some(known) = known {
        walk.hide(known)?;
    }
    let mut seen = std::collections::HashSet::new();
    for commit in walk {
        let commit = repo.find_commit(commit?)?;
        let mut trees = vec![commit.tree_id()];
        while let Some(id) = trees.pop() {
            if !seen.insert(id) {
                continue;
            }
            for entry in repo.find_tree(id)?.iter() {
                match entry.kind() {
                    Some(git2::ObjectType::Tree) => trees.push(entry.id()),
                    Some(git2::ObjectType::Blob) if !odb.exists(entry.id()) => {
                        bail!("object {} is missing", entry.id())
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

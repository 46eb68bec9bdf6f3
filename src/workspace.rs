//! git2: the branch `owl/<job-id>` and the working copy per Job — a worktree of the user's repository (ADR-0007), or for a sandboxed Run the Job's own clone, whose branch is brought back after each Run — and reading the Handoff at the branch head.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use git2::{BranchType, Repository, WorktreeAddOptions, WorktreePruneOptions};

use crate::handoff::HANDOFF_PATH;
use crate::model::Job;

/// Checks that `repo` is a git repository and `base` resolves to a commit; returns the
/// repository's canonical path and the base commit's id.
pub fn check_repo(repo: &Path, base: &str) -> Result<(PathBuf, String)> {
    let r = Repository::open(repo).map_err(|e| {
        anyhow!(
            "{} is not a git repository: {}",
            repo.display(),
            e.message()
        )
    })?;
    let commit = r
        .revparse_single(base)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| {
            anyhow!(
                "base '{base}' does not resolve to a commit in {}: {}",
                repo.display(),
                e.message()
            )
        })?;
    let root = r
        .workdir()
        .unwrap_or_else(|| r.path())
        .canonicalize()
        .with_context(|| format!("resolving {}", repo.display()))?;
    Ok((root, commit.id().to_string()))
}

/// The worktree of a Job under the state dir.
pub fn worktree_path(worktrees_dir: &Path, job_id: &str) -> PathBuf {
    worktrees_dir.join(job_id)
}

/// A Job's worktree, opened once for a Run: every look at it during the Run (its head
/// before and after, the Handoff, the safety-net commit) goes through this one handle
/// instead of opening the repository again each time.
pub struct Workspace {
    path: PathBuf,
    branch: String,
    repo: Repository,
}

impl Workspace {
    /// Opens the worktree at `path` (on whatever branch it is).
    pub fn open(path: &Path) -> Result<Workspace> {
        let repo = Repository::open(path)
            .with_context(|| format!("opening worktree {}", path.display()))?;
        let branch = repo
            .head()
            .ok()
            .and_then(|h| h.shorthand().map(String::from))
            .unwrap_or_default();
        Ok(Workspace {
            path: path.to_path_buf(),
            branch,
            repo,
        })
    }

    /// Where the worktree is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The git directories a commit in the worktree writes: the repository's own (objects,
    /// refs), which the worktree shares.
    pub fn git_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.repo.commondir().to_path_buf()];
        // The worktree's own git directory (its index, HEAD) lies inside the common one,
        // but a sandbox that protects what a `.git` file points to needs it named.
        if self.repo.path() != self.repo.commondir() {
            dirs.push(self.repo.path().to_path_buf());
        }
        dirs
    }

    /// Whether this is a Job's own clone (a sandboxed Run's), not a worktree sharing the
    /// user's repository.
    pub fn is_clone(&self) -> bool {
        !self.repo.is_worktree()
    }

    /// Brings the Job's branch from its own clone into the user's repository, with a local
    /// fetch of that one ref: the only write owl makes there. Only a fast-forward (or a
    /// branch the user's repository lacks) is brought; a branch that moved there since is
    /// left alone and named in the error, the work staying in the clone. Returns whether
    /// the branch moved.
    pub fn publish(&self, job: &Job) -> Result<bool> {
        let user = Repository::open(&job.repo)
            .with_context(|| format!("opening repository {}", job.repo))?;
        let branch = job.branch();
        let Some(ours) = self.repo.head().ok().and_then(|h| h.target()) else {
            bail!(
                "the clone {} has no commit on {branch}",
                self.path.display()
            );
        };
        let theirs = user
            .find_branch(&branch, BranchType::Local)
            .ok()
            .and_then(|b| b.get().target());
        if theirs == Some(ours) {
            return Ok(false);
        }
        // The clone reads the user's objects, so it can tell ancestry before any fetch.
        if let Some(theirs) = theirs {
            if !self.repo.graph_descendant_of(ours, theirs)? {
                bail!(
                    "{branch} in {} moved since the Run began ({theirs}); not overwritten: the \
                     Run's work is on {branch} in {}",
                    job.repo,
                    self.path.display()
                );
            }
        }
        let source = self
            .path
            .to_str()
            .ok_or_else(|| anyhow!("the clone path {} is not UTF-8", self.path.display()))?;
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        user.remote_anonymous(source)?
            .fetch(&[refspec.as_str()], None, None)
            .with_context(|| format!("bringing {branch} into {}", job.repo))?;
        Ok(true)
    }

    /// The commit the worktree's HEAD (the Job's branch) points at.
    pub fn head(&self) -> Option<String> {
        let head = self.repo.head().ok()?.peel_to_commit().ok()?;
        Some(head.id().to_string())
    }

    /// The Handoff committed at the head of the Job's branch: `Ok(None)` when there is none.
    pub fn handoff(&self) -> Result<Option<String>> {
        handoff_on(&self.repo, &self.branch)
    }

    /// How many commits `to` has that `from` does not.
    pub fn commits_between(&self, from: &str, to: &str) -> Result<usize> {
        count_commits(&self.repo, from, to)
    }

    /// Commits whatever the Run left uncommitted (ADR-0017's safety net), on the Job's
    /// branch only. Returns the new commit's id, or `None` when the tree was clean.
    pub fn safety_commit(&self, author: &str, message: &str) -> Result<Option<String>> {
        let repo = &self.repo;
        let head = repo.head()?;
        if !head.is_branch() {
            bail!(
                "worktree {} is not on a branch; not committing",
                self.path.display()
            );
        }
        let parent = head.peel_to_commit()?;
        let mut index = repo.index()?;
        // The agent's own `git add` changed the index on disk since the worktree was opened.
        index.read(true)?;
        // add_all honours .gitignore; update_all records deletions.
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
        index.update_all(["*"], None)?;
        index.write()?;
        let tree_id = index.write_tree()?;
        if tree_id == parent.tree_id() {
            return Ok(None);
        }
        let tree = repo.find_tree(tree_id)?;
        let (name, email) = parse_author(author);
        let sig = git2::Signature::now(&name, &email)?;
        let id = repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])?;
        Ok(Some(id.to_string()))
    }
}

/// Creates the Job's branch from its base ref and its worktree, or reuses both.
pub fn prepare(job: &Job, worktrees_dir: &Path) -> Result<Workspace> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    let branch = match repo.find_branch(&branch_name, BranchType::Local) {
        Ok(b) => b,
        Err(_) => {
            let base = repo
                .revparse_single(job.base_commit.as_deref().unwrap_or(&job.base))
                .and_then(|o| o.peel_to_commit())
                .with_context(|| format!("resolving base '{}' in {}", job.base, job.repo))?;
            repo.branch(&branch_name, &base, false)
                .with_context(|| format!("creating branch {branch_name} in {}", job.repo))?
        }
    };
    let path = worktree_path(worktrees_dir, &job.id);
    if path.exists() {
        let wt = Workspace::open(&path)
            .with_context(|| format!("{} exists but is not a git worktree", path.display()))?;
        if wt.is_clone() {
            // A sandboxed Run's clone: its work is brought back first, then it gives way.
            wt.publish(job)?;
            if is_dirty(&path)? {
                bail!(
                    "the clone {} has uncommitted changes from a sandboxed Run; commit them \
                     before a local Run takes the Job",
                    path.display()
                );
            }
            drop(wt);
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing {}", path.display()))?;
            return prepare(job, worktrees_dir);
        }
        if wt.branch != branch_name {
            bail!(
                "worktree {} is on {}, not on {branch_name}",
                path.display(),
                if wt.branch.is_empty() || wt.branch == "HEAD" {
                    "a detached HEAD"
                } else {
                    &wt.branch
                }
            );
        }
        return Ok(wt);
    }
    let name = worktree_name(&job.id);
    // A worktree whose folder was deleted by hand is still registered: prune it first.
    if let Ok(stale) = repo.find_worktree(&name) {
        stale
            .prune(Some(
                WorktreePruneOptions::new().valid(true).working_tree(true),
            ))
            .with_context(|| format!("pruning stale worktree {name}"))?;
    }
    create_private_dir(worktrees_dir)?;
    let reference = branch.into_reference();
    repo.worktree(
        &name,
        &path,
        Some(WorktreeAddOptions::new().reference(Some(&reference))),
    )
    .with_context(|| format!("adding worktree {} on {branch_name}", path.display()))?;
    Workspace::open(&path)
}

/// Creates the Job's own clone for a sandboxed Run, or reuses it: a repository of its own
/// at the Job's worktree path, on the Job's branch, which reads the user's objects through
/// `objects/info/alternates` (read only; its new objects stay in the clone). The user's
/// repository gets the branch at the base if it lacks it, nothing more: a tool in the
/// sandbox can write the clone, never the user's `.git`. A worktree left there by a local
/// Run gives way to the clone when it holds no uncommitted work (its commits are on the
/// branch).
pub fn prepare_clone(job: &Job, worktrees_dir: &Path) -> Result<Workspace> {
    let user =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    let start = match user.find_branch(&branch_name, BranchType::Local) {
        Ok(b) => b.get().peel_to_commit()?,
        Err(_) => {
            let base = user
                .revparse_single(job.base_commit.as_deref().unwrap_or(&job.base))
                .and_then(|o| o.peel_to_commit())
                .with_context(|| format!("resolving base '{}' in {}", job.base, job.repo))?;
            user.branch(&branch_name, &base, false)
                .with_context(|| format!("creating branch {branch_name} in {}", job.repo))?;
            base
        }
    };
    let path = worktree_path(worktrees_dir, &job.id);
    if path.exists() {
        let ws = Workspace::open(&path)?;
        if ws.is_clone() {
            if ws.branch != branch_name {
                bail!("the clone {} is not on {branch_name}", path.display());
            }
            return Ok(ws);
        }
        if is_dirty(&path)? {
            bail!(
                "worktree {} has uncommitted changes from a local Run; commit them before a \
                 sandboxed Run takes the Job",
                path.display()
            );
        }
        drop(ws);
        remove_worktree(job, worktrees_dir)?;
    }
    create_private_dir(worktrees_dir)?;
    let clone = Repository::init(&path)
        .with_context(|| format!("creating the clone {}", path.display()))?;
    let objects = user.commondir().join("objects");
    let alternates = clone.path().join("objects/info/alternates");
    std::fs::write(&alternates, format!("{}\n", objects.display()))
        .with_context(|| format!("writing {}", alternates.display()))?;
    {
        let start = clone.find_commit(start.id())?;
        clone.branch(&branch_name, &start, false)?;
    }
    clone.set_head(&format!("refs/heads/{branch_name}"))?;
    clone
        .checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .with_context(|| format!("checking out {branch_name} in {}", path.display()))?;
    Workspace::open(&path)
}

/// A directory readable by the user alone, whatever the umask: it holds the user's code and
/// the agent's work.
fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

fn worktree_name(job_id: &str) -> String {
    format!("owl-{job_id}")
}

/// The Handoff committed at the head of the Job's branch: `Ok(None)` when there is none.
pub fn read_handoff(job: &Job) -> Result<Option<String>> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    handoff_on(&repo, &job.branch())
}

fn handoff_on(repo: &Repository, branch: &str) -> Result<Option<String>> {
    let Ok(branch) = repo.find_branch(branch, BranchType::Local) else {
        return Ok(None);
    };
    let tree = branch.get().peel_to_tree()?;
    let Ok(entry) = tree.get_path(Path::new(HANDOFF_PATH)) else {
        return Ok(None);
    };
    let blob = entry.to_object(repo)?.peel_to_blob()?;
    Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
}

/// What the Job's branch holds beyond its base, for `owl show`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BranchSummary {
    pub commits: usize,
    pub files_changed: usize,
    pub insertions: usize,
    pub deletions: usize,
}

/// Counts the commits on the Job's branch that its base does not have, and their diffstat.
pub fn branch_summary(job: &Job) -> Result<Option<BranchSummary>> {
    let repo = Repository::open(&job.repo)?;
    let Ok(branch) = repo.find_branch(&job.branch(), BranchType::Local) else {
        return Ok(None);
    };
    let head = branch.get().peel_to_commit()?;
    let base = repo
        .revparse_single(job.base_commit.as_deref().unwrap_or(&job.base))?
        .peel_to_commit()?;
    let merge_base = repo.merge_base(head.id(), base.id())?;
    let mut walk = repo.revwalk()?;
    walk.push(head.id())?;
    walk.hide(merge_base)?;
    let commits = walk.count();
    let diff = repo.diff_tree_to_tree(
        Some(&repo.find_commit(merge_base)?.tree()?),
        Some(&head.tree()?),
        None,
    )?;
    let stats = diff.stats()?;
    Ok(Some(BranchSummary {
        commits,
        files_changed: stats.files_changed(),
        insertions: stats.insertions(),
        deletions: stats.deletions(),
    }))
}

/// The commits each Run added, `(head_before, head_after)` per Run, with the repository
/// opened once (`None` where a Run has no heads or they cannot be walked).
pub fn commits_of_runs(
    repo_path: &str,
    heads: &[(Option<&str>, Option<&str>)],
) -> Vec<Option<usize>> {
    let repo = Repository::open(repo_path).ok();
    heads
        .iter()
        .map(|(from, to)| count_commits(repo.as_ref()?, (*from)?, (*to)?).ok())
        .collect()
}

fn count_commits(repo: &Repository, from: &str, to: &str) -> Result<usize> {
    let mut walk = repo.revwalk()?;
    walk.push(git2::Oid::from_str(to)?)?;
    walk.hide(git2::Oid::from_str(from)?)?;
    Ok(walk.count())
}

/// Splits `Name <email>`; a bare name gets `owl@localhost`.
fn parse_author(author: &str) -> (String, String) {
    match author.split_once('<') {
        Some((name, rest)) => (
            name.trim().to_string(),
            rest.trim_end().trim_end_matches('>').trim().to_string(),
        ),
        None => (author.trim().to_string(), "owl@localhost".to_string()),
    }
}

/// Whether the worktree has changes git would commit.
pub fn is_dirty(worktree: &Path) -> Result<bool> {
    let repo = Repository::open(worktree)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true);
    let dirty = !repo.statuses(Some(&mut opts))?.is_empty();
    Ok(dirty)
}

/// Removes a Job's worktree (the branch stays, so the work is never lost).
pub fn remove_worktree(job: &Job, worktrees_dir: &Path) -> Result<bool> {
    let path = worktree_path(worktrees_dir, &job.id);
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let existed = path.exists();
    if let Ok(ws) = Workspace::open(&path) {
        if ws.is_clone() {
            let ours = ws.head();
            let theirs = repo
                .find_branch(&job.branch(), BranchType::Local)
                .ok()
                .and_then(|b| b.get().target())
                .map(|t| t.to_string());
            if ours.is_some() && ours != theirs {
                bail!(
                    "the clone {} holds work not yet in {} (its {} is at {}); it is kept",
                    path.display(),
                    job.repo,
                    job.branch(),
                    ours.unwrap_or_default()
                );
            }
        }
    }
    if let Ok(wt) = repo.find_worktree(&worktree_name(&job.id)) {
        wt.prune(Some(
            WorktreePruneOptions::new().valid(true).working_tree(true),
        ))
        .with_context(|| format!("removing worktree {}", path.display()))?;
    }
    if path.exists() {
        std::fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(existed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authors() {
        assert_eq!(
            parse_author("owl <owl@localhost>"),
            ("owl".into(), "owl@localhost".into())
        );
        assert_eq!(
            parse_author("Night Shift"),
            ("Night Shift".into(), "owl@localhost".into())
        );
    }
}

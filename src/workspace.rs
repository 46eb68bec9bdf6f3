//! git2: the branch `owl/<job-id>` and the working copy per Job — a worktree of the user's repository (ADR-0007), or for a sandboxed Run the Job's own clone, whose branch is brought back after each Run — and reading the Handoff at the branch head.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use git2::{BranchType, Repository, WorktreeAddOptions, WorktreePruneOptions};

use crate::handoff::{HandoffError, HANDOFF_PATH};
use crate::model::{Job, Run};

mod seal;
pub(crate) use seal::Tampered;

mod prepare;
pub(crate) use prepare::*;

mod home;
pub(crate) use home::{clear_killed_publish, HomeRun};

/// Where a stacked Job starts: the commit `branch` points at in `repo` now; `None` when
/// there is no such branch (its Job never ran).
pub(crate) fn branch_tip(repo: &Path, branch: &str) -> Result<Option<String>> {
    let r = Repository::open(repo).with_context(|| format!("opening {}", repo.display()))?;
    let found = match r.find_branch(branch, BranchType::Local) {
        Ok(b) => b,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("finding {branch} in {}", repo.display())),
    };
    Ok(found
        .get()
        .peel_to_commit()
        .ok()
        .map(|c| c.id().to_string()))
}

/// Whether `repo` holds the commit `id`.
pub(crate) fn has_commit(repo: &Path, id: &str) -> bool {
    let Ok(oid) = git2::Oid::from_str(id) else {
        return false;
    };
    Repository::open(repo).is_ok_and(|r| r.find_commit(oid).is_ok())
}

/// Checks that `repo` is in a git repository and `base` resolves to a commit; returns the
/// repository's canonical path (its top level, found from a subdirectory as git finds it)
/// and the base commit's id.
pub(crate) fn check_repo(repo: &Path, base: &str) -> Result<(PathBuf, String)> {
    if let Err(e) = std::fs::metadata(repo) {
        bail!("{}: {}", repo.display(), crate::text::io_words(&e));
    }
    // libgit2's own words ("could not find repository at …") say it again, less plainly.
    let r = Repository::discover(repo).map_err(|_| {
        anyhow!(
            "{} is not in a git repository (nor is any of its parents)",
            repo.display()
        )
    })?;
    // An unborn HEAD, whatever the branch is called (libgit2's is_empty knows only the
    // configured default name, so `git init -b main` would pass it).
    let unborn = matches!(r.head(), Err(e) if e.code() == git2::ErrorCode::UnbornBranch);
    if unborn || r.is_empty().unwrap_or(false) {
        bail!(
            "the repository {} has no commits yet: a Job's branch starts at a commit; commit \
             once, then add the Job",
            repo.display()
        );
    }
    let commit = r
        .revparse_single(base)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| {
            anyhow!(
                "base '{base}' names no branch, tag or commit in {}",
                repo.display()
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
fn worktree_path(worktrees_dir: &Path, job_id: &str) -> PathBuf {
    worktrees_dir.join(job_id)
}

/// A Job's worktree, opened once for a Run: every look at it during the Run (its head
/// before and after, the Handoff, the safety-net commit) goes through this one handle
/// instead of opening the repository again each time.
pub(crate) struct Workspace {
    path: PathBuf,
    branch: String,
    repo: Repository,
    /// The branch the Job's Runs work on, `owl/<id>`: the only one owl commits to.
    job_branch: String,
    sealed: Vec<String>,
}

/// A sealed clone, opened by its `.git` as a bare repository with the work tree set by owl:
/// no `core.worktree` of the agent's can move it.
fn open_sealed(path: &Path) -> Result<Repository> {
    let repo = Repository::open_bare(path.join(".git"))
        .with_context(|| format!("opening the clone {}", path.display()))?;
    repo.set_workdir(path, false)?;
    Ok(repo)
}

/// [`seal::remove_nested`], its failure said as the clone's.
fn nested(repo: &Repository, path: &Path) -> Result<Vec<String>> {
    seal::remove_nested(repo, path).map_err(|e| {
        Tampered {
            clone: path.display().to_string(),
            what: format!("removing a repository inside it: {e}"),
        }
        .into()
    })
}

/// The user's repository's object store, which a Job's clone reads through its alternates.
fn user_objects(job: &Job) -> Result<PathBuf> {
    let user =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    Ok(user.commondir().join("objects"))
}

impl Workspace {
    /// Opens the Job's working copy at `path`, in a way the agent cannot redirect: a clone
    /// (`.git` a directory) is sealed first and opened by its own `.git`, whatever config it
    /// set; a worktree's `.git` file must lead to the user's repository's own record of it.
    /// A `.git` that is a symlink is never followed.
    pub(crate) fn open(path: &Path, job: &Job) -> Result<Workspace> {
        let git = path.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(meta) if meta.is_dir() => Workspace::open_clone(path, job),
            Ok(meta) if meta.is_file() => Workspace::open_worktree(path, job),
            Ok(_) => Err(Tampered {
                clone: path.display().to_string(),
                what: ".git is a symlink".into(),
            }
            .into()),
            Err(e) => Err(anyhow!("{} is not a git worktree: {e}", path.display())),
        }
    }

    fn open_worktree(path: &Path, job: &Job) -> Result<Workspace> {
        let user = Repository::open(&job.repo)
            .with_context(|| format!("opening repository {}", job.repo))?;
        let registered = user
            .find_worktree(&worktree_name(&job.id))
            .ok()
            .and_then(|wt| wt.path().canonicalize().ok());
        if registered.is_none() || registered != path.canonicalize().ok() {
            bail!(
                "{} is not the worktree {} has for job {}",
                path.display(),
                job.repo,
                job.id
            );
        }
        let repo = Repository::open_ext(path, git2::RepositoryOpenFlags::NO_SEARCH, [""; 0])
            .with_context(|| format!("opening worktree {}", path.display()))?;
        Ok(Workspace::new(path, repo, job, Vec::new()))
    }

    fn open_clone(path: &Path, job: &Job) -> Result<Workspace> {
        let objects = user_objects(job)?;
        let mut sealed = seal::seal(path, &objects)?;
        let repo = open_sealed(path)?;
        sealed.extend(nested(&repo, path)?);
        Ok(Workspace::new(path, repo, job, sealed))
    }

    fn new(path: &Path, repo: Repository, job: &Job, sealed: Vec<String>) -> Workspace {
        let branch = repo
            .head()
            .ok()
            .and_then(|h| h.shorthand().map(String::from))
            .unwrap_or_default();
        Workspace {
            path: path.to_path_buf(),
            branch,
            repo,
            job_branch: job.branch(),
            sealed,
        }
    }

    /// Seals a clone again after a Run, before owl commits or reads there; returns what was
    /// undone this time (nothing for a worktree, whose Run was not confined).
    pub(crate) fn reseal(&mut self, job: &Job) -> Result<Vec<String>> {
        if !self.is_clone() {
            return Ok(Vec::new());
        }
        let mut undone = seal::seal(&self.path, &user_objects(job)?)?;
        // Opened anew: nothing libgit2 read of the config before the seal lingers.
        self.repo = open_sealed(&self.path)?;
        undone.extend(nested(&self.repo, &self.path)?);
        self.sealed.extend(undone.iter().cloned());
        Ok(undone)
    }

    /// What sealing the clone undid since it was opened (`config core.fsmonitor`, …).
    pub(crate) fn sealed(&self) -> &[String] {
        &self.sealed
    }

    /// Where the worktree is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The git directories a commit in the worktree writes: the repository's own (objects,
    /// refs), which the worktree shares.
    pub(crate) fn git_dirs(&self) -> Vec<PathBuf> {
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
    pub(crate) fn is_clone(&self) -> bool {
        !self.repo.is_worktree()
    }

    /// Why the working copy's head is not the commit the user's repository holds under the
    /// Job's branch, if it is not: a check run there would verify what the user never gets
    /// (a detached or other branch checked out, a clone's branch not brought home).
    pub(crate) fn not_at_home(&self, job: &Job) -> Result<Option<String>> {
        let head = self.repo.head().ok();
        let on = head
            .as_ref()
            .filter(|h| h.is_branch())
            .and_then(|h| h.shorthand().map(String::from));
        if on.as_deref() != Some(self.job_branch.as_str()) {
            return Ok(Some(format!(
                "the working copy {} is not on {} (its HEAD is {})",
                self.path.display(),
                self.job_branch,
                on.or_else(|| self.head())
                    .unwrap_or_else(|| "unborn".into())
            )));
        }
        let ours = self.head();
        let user = Repository::open(&job.repo)
            .with_context(|| format!("opening repository {}", job.repo))?;
        let theirs = user
            .refname_to_id(&format!("refs/heads/{}", self.job_branch))
            .ok()
            .map(|id| id.to_string());
        Ok((ours != theirs).then(|| {
            format!(
                "{} in {} is at {}, not at the working copy's {}",
                self.job_branch,
                job.repo,
                theirs.unwrap_or_else(|| "nothing".into()),
                ours.unwrap_or_else(|| "nothing".into())
            )
        }))
    }

    /// The commit the worktree's HEAD (the Job's branch) points at.
    pub(crate) fn head(&self) -> Option<String> {
        let head = self.repo.head().ok()?.peel_to_commit().ok()?;
        Some(head.id().to_string())
    }

    /// The Handoff committed at the head of the Job's branch: `Ok(None)` when there is none.
    pub(crate) fn handoff(&self) -> Result<Option<String>, HandoffError> {
        handoff_on(&self.repo, &self.job_branch)
    }

    /// Whether the working copy has changes git would commit.
    pub(crate) fn is_dirty(&self) -> Result<bool> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true);
        Ok(!self.repo.statuses(Some(&mut opts))?.is_empty())
    }

    /// The commits a Run added, from the head it began at to the one it ended at, as
    /// recorded with the Run; `None` when either is unknown or git cannot tell.
    pub(crate) fn commits_added(&self, before: Option<&str>, after: Option<&str>) -> Option<i64> {
        let n = count_commits(&self.repo, before?, after?).ok()?;
        i64::try_from(n).ok()
    }

    /// Removes the locks a killed Run's git left in this working copy's own git dir (its
    /// index and HEAD locks): with every process of the Run gone, nobody holds them, and
    /// each would fail every later Run's git ("Unable to create index.lock"). The names
    /// removed, for the Run's note.
    fn clear_stale_locks(&self) -> Vec<String> {
        let mut cleared: Vec<String> = ["index.lock", "HEAD.lock"]
            .into_iter()
            .filter(|name| remove_lock(&self.repo.path().join(name)))
            .map(String::from)
            .collect();
        cleared.extend(clear_branch_lock(&self.repo, &self.job_branch));
        cleared
    }

    /// [`Workspace::clear_stale_locks`], said when it removed any: call it only with the
    /// tick lock held and no process of the Job's Runs alive (before a Run, or at recovery
    /// once the lost Run's processes are gone), so no git of theirs or of owl's lives.
    pub(crate) fn warn_of_stale_locks(&self) {
        let cleared = self.clear_stale_locks();
        if !cleared.is_empty() {
            tracing::warn!(
                "{}: removed the git lock(s) a killed git left: {}",
                self.path.display(),
                cleared.join(", ")
            );
        }
    }

    /// What owl does with a Run's work however the Run ended, recorded by its tick or found
    /// lost by a later one: ADR-0017's safety net, then, for a clone, its branch brought
    /// into the user's repository (the Run may be its Job's last: no later one would).
    /// Failures are warned of and said, never fatal.
    pub(crate) fn bring_home(&self, job: &Job, run: &HomeRun) -> BroughtHome {
        let HomeRun {
            author,
            run_id,
            began_at,
            mark,
        } = *run;
        // A Run cut short loses nothing it wrote.
        let safety_commit = self.safety_net(author, run_id);
        let not_published = self
            .is_clone()
            .then(|| self.publish(job, began_at, Some(mark)).err())
            .flatten()
            .map(|e| {
                tracing::warn!("run {run_id}: {e:#}");
                format!("the branch was not brought into the repository: {e:#}")
            });
        BroughtHome {
            safety_commit,
            not_published,
        }
    }

    /// What was left uncommitted after Run `run_id` is committed; a failure is warned of.
    fn safety_net(&self, author: &str, run_id: i64) -> Option<String> {
        self.safety_commit(
            author,
            &format!("owl: uncommitted work left by run {run_id}"),
        )
        .unwrap_or_else(|e| {
            tracing::warn!("committing what run {run_id} left: {e:#}");
            None
        })
    }

    /// Commits whatever the Run left uncommitted (ADR-0017's safety net), on the Job's
    /// branch only. Returns the new commit's id, or `None` when the tree was clean.
    pub(crate) fn safety_commit(&self, author: &str, message: &str) -> Result<Option<String>> {
        let repo = &self.repo;
        let head = repo.head()?;
        if !head.is_branch() || head.shorthand() != Some(self.job_branch.as_str()) {
            bail!(
                "worktree {} is not on {}; not committing",
                self.path.display(),
                self.job_branch
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

/// What [`Workspace::bring_home`] did.
#[derive(Debug, Default)]
pub(crate) struct BroughtHome {
    /// The safety net's commit, when the Run left anything uncommitted.
    pub(crate) safety_commit: Option<String>,
    /// Why a clone's branch did not reach the user's repository, if it did not.
    pub(crate) not_published: Option<String>,
}

/// The Handoff committed at the head of the Job's branch: `Ok(None)` when there is none.
pub(crate) fn read_handoff(job: &Job) -> Result<Option<String>, HandoffError> {
    let repo = Repository::open(&job.repo)
        .map_err(|e| HandoffError::Unreadable(format!("opening {}: {}", job.repo, e.message())))?;
    handoff_on(&repo, &job.branch())
}

/// The Handoff on `branch`, read only when it is a file no larger than
/// [`HANDOFF_CAP`](crate::handoff::HANDOFF_CAP): the agent decides what is committed there.
fn handoff_on(repo: &Repository, branch: &str) -> Result<Option<String>, HandoffError> {
    let unreadable = |e: git2::Error| HandoffError::Unreadable(e.message().to_string());
    let Ok(branch) = repo.find_branch(branch, BranchType::Local) else {
        return Ok(None);
    };
    let tree = branch.get().peel_to_tree().map_err(unreadable)?;
    let Ok(entry) = tree.get_path(Path::new(HANDOFF_PATH)) else {
        return Ok(None);
    };
    match entry.filemode() {
        0o100644 | 0o100755 => {}
        0o040000 => return Err(HandoffError::NotAFile("a directory".into())),
        0o120000 => return Err(HandoffError::NotAFile("a symlink".into())),
        0o160000 => return Err(HandoffError::NotAFile("a submodule".into())),
        mode => return Err(HandoffError::NotAFile(format!("of mode {mode:o}"))),
    }
    // Its size from the object's header: a blob over the cap is never inflated.
    let (size, _) = repo
        .odb()
        .and_then(|odb| odb.read_header(entry.id()))
        .map_err(unreadable)?;
    if size > crate::handoff::HANDOFF_CAP {
        return Err(HandoffError::TooLarge(size as u64));
    }
    let blob = repo.find_blob(entry.id()).map_err(unreadable)?;
    Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
}

/// What the Job's branch holds beyond its base, for `owl show`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BranchSummary {
    pub(crate) commits: usize,
    pub(crate) files_changed: usize,
    pub(crate) insertions: usize,
    pub(crate) deletions: usize,
    /// The agent CLIs' settings files the branch added, changed or removed: never read by
    /// a Run's CLI, named so that whoever merges the branch knows.
    pub(crate) settings_changed: Vec<String>,
}

/// Counts the commits on the Job's branch that its base does not have, and their diffstat.
pub(crate) fn branch_summary(job: &Job, runs: &[Run]) -> Result<Option<BranchSummary>> {
    let repo = Repository::open(&job.repo)?;
    let Ok(branch) = repo.find_branch(&job.branch(), BranchType::Local) else {
        return Ok(None);
    };
    let head = branch.get().peel_to_commit()?;
    // Where the branch is what the Runs left, their record says what a walk of the whole
    // branch would: a thousand Runs are not a thousand commits read again.
    let (merge_base, commits) = match recorded_chain(job, runs) {
        Some((tip, commits)) if tip == head.id().to_string() => {
            let base = job.base_commit.as_deref().unwrap_or_default();
            (git2::Oid::from_str(base)?, commits)
        }
        _ => {
            let base = repo
                .revparse_single(job.base_commit.as_deref().unwrap_or(&job.base))?
                .peel_to_commit()?;
            let merge_base = repo.merge_base(head.id(), base.id())?;
            let mut walk = repo.revwalk()?;
            walk.push(head.id())?;
            walk.hide(merge_base)?;
            (merge_base, walk.count())
        }
    };
    // A blob over a MiB is counted as binary, never loaded: the agent chose its size.
    let mut options = git2::DiffOptions::new();
    options.max_size(1 << 20);
    let diff = repo.diff_tree_to_tree(
        Some(&repo.find_commit(merge_base)?.tree()?),
        Some(&head.tree()?),
        Some(&mut options),
    )?;
    let stats = diff.stats()?;
    let mut settings_changed: Vec<String> = diff
        .deltas()
        .flat_map(|d| [d.old_file().path(), d.new_file().path()])
        .flatten()
        .filter_map(|p| p.to_str())
        .filter(|p| crate::agent_settings::is_settings_file(p))
        .map(String::from)
        .collect();
    settings_changed.sort();
    settings_changed.dedup();
    Ok(Some(BranchSummary {
        commits,
        files_changed: stats.files_changed(),
        insertions: stats.insertions(),
        deletions: stats.deletions(),
        settings_changed,
    }))
}

/// The head the Job's Runs left its branch at and the commits they added, when their
/// recorded heads follow one another from the Job's base commit (each Run began where the
/// one before ended); `None` when any Run's record is missing or the chain is broken.
fn recorded_chain(job: &Job, runs: &[Run]) -> Option<(String, usize)> {
    let mut tip = job.base_commit.clone()?;
    let mut commits = 0;
    for run in runs {
        match (&run.head_before, &run.head_after, run.commits) {
            // A Run that never reached its working copy.
            (None, None, _) => {}
            (Some(before), Some(after), Some(n)) if *before == tip => {
                tip = after.clone();
                commits += usize::try_from(n).ok()?;
            }
            _ => return None,
        }
    }
    Some((tip, commits))
}

/// The commits each Run added, `(head_before, head_after)` per Run, with the repository
/// opened once (`None` where a Run has no heads or they cannot be walked).
pub(crate) fn commits_of_runs(
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

/// Removes a Job's worktree (the branch stays, so the work is never lost).
pub(crate) fn remove_worktree(job: &Job, worktrees_dir: &Path) -> Result<bool> {
    let path = worktree_path(worktrees_dir, &job.id);
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let existed = path.exists();
    if let Ok(ws) = Workspace::open(&path, job) {
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
    fn a_killed_fetchs_locks_are_cleared_and_an_older_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let job = Job {
            id: "ab12cd".into(),
            repo: repo.workdir().unwrap().display().to_string(),
            ..Job::default()
        };
        let git = repo.commondir().to_path_buf();
        let older = git.join("shallow.lock");
        std::fs::write(&older, "").unwrap();
        // Someone else's lock, made before owl's mark: kept.
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&older)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mark = dir.path().join("7.bringing-home");
        std::fs::write(&mark, "1\n").unwrap();
        assert!(clear_killed_publish(&job, &mark).is_empty());
        assert!(older.exists());
        assert!(!mark.exists(), "the mark is spent");
        // Made since the mark: owl's own, removed.
        std::fs::write(&mark, "1\n").unwrap();
        std::fs::remove_file(&older).unwrap();
        std::fs::create_dir_all(git.join("refs/heads/owl")).unwrap();
        std::fs::write(&older, "").unwrap();
        std::fs::write(git.join("refs/heads/owl/ab12cd.lock"), "").unwrap();
        assert_eq!(
            clear_killed_publish(&job, &mark),
            ["shallow.lock", "refs/heads/owl/ab12cd.lock"]
        );
        assert!(!older.exists());
        // No mark, nothing touched.
        std::fs::write(&older, "").unwrap();
        assert!(clear_killed_publish(&job, &mark).is_empty());
        assert!(older.exists());
    }

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

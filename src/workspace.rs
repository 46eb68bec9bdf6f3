//! git2: the branch `owl/<job-id>` and the working copy per Job — a worktree of the user's repository (ADR-0007), or for a sandboxed Run the Job's own clone, whose branch is brought back after each Run — and reading the Handoff at the branch head.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use git2::{BranchType, Repository, WorktreeAddOptions, WorktreePruneOptions};

use crate::handoff::{HandoffError, HANDOFF_PATH};
use crate::model::Job;

mod seal;
pub(crate) use seal::Tampered;

/// Checks that `repo` is a git repository and `base` resolves to a commit; returns the
/// repository's canonical path and the base commit's id.
pub(crate) fn check_repo(repo: &Path, base: &str) -> Result<(PathBuf, String)> {
    let r = Repository::open(repo).map_err(|e| {
        anyhow!(
            "{} is not a git repository: {}",
            repo.display(),
            e.message()
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

    /// Brings the Job's branch from its own clone into the user's repository: the only write
    /// owl makes there. The objects come first, by a local download of that one ref that
    /// moves no ref and writes no `FETCH_HEAD`; once every object the new commits reach is there,
    /// `refs/heads/owl/<id>` moves, as a fast-forward only (or is created), and only from
    /// where it was. A branch that moved there since is left alone and named in the error,
    /// the work staying in the clone. Returns whether the branch moved.
    pub(crate) fn publish(&self, job: &Job) -> Result<bool> {
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
        let moved = || {
            anyhow!(
                "{branch} in {} moved since the Run began; not overwritten: the Run's work \
                 is on {branch} in {}",
                job.repo,
                self.path.display()
            )
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

    /// How many commits `to` has that `from` does not.
    pub(crate) fn commits_between(&self, from: &str, to: &str) -> Result<usize> {
        count_commits(&self.repo, from, to)
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
    pub(crate) fn bring_home(&self, job: &Job, author: &str, run_id: i64) -> BroughtHome {
        // A Run cut short loses nothing it wrote.
        let safety_commit = self.safety_net(author, run_id);
        let not_published = self
            .is_clone()
            .then(|| self.publish(job).err())
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
    pub safety_commit: Option<String>,
    /// Why a clone's branch did not reach the user's repository, if it did not.
    pub not_published: Option<String>,
}

/// Creates the Job's branch from its base ref and its worktree, or reuses both.
pub(crate) fn prepare(job: &Job, worktrees_dir: &Path) -> Result<Workspace> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    if let Some(lock) = clear_branch_lock(&repo, &branch_name) {
        tracing::warn!("{}: removed {lock}, left by a killed git", job.repo);
    }
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
    clear_half_made(&path)?;
    if path.exists() {
        let wt = Workspace::open(&path, job)
            .with_context(|| format!("{} exists but is not a git worktree", path.display()))?;
        if wt.is_clone() {
            // A sandboxed Run's clone: its work is brought back first, then it gives way.
            wt.publish(job)?;
            if wt.is_dirty()? {
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
        wt.warn_of_stale_locks();
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
    // A registration a killed tick left half-written (its `gitdir` file not yet there):
    // libgit2 neither finds it nor adds over it. It is owl's own name and holds no work.
    let registration = repo.commondir().join("worktrees").join(&name);
    if std::fs::symlink_metadata(&registration).is_ok() {
        tracing::warn!(
            "{} was left half-made; making it again",
            registration.display()
        );
        remove_entry(&registration)?;
    }
    create_private_dir(worktrees_dir)?;
    let reference = branch.into_reference();
    repo.worktree(
        &name,
        &path,
        Some(WorktreeAddOptions::new().reference(Some(&reference))),
    )
    .with_context(|| format!("adding worktree {} on {branch_name}", path.display()))?;
    Workspace::open(&path, job)
}

/// Creates the Job's own clone for a sandboxed Run, or reuses it: a repository of its own
/// at the Job's worktree path, on the Job's branch, which reads the user's objects through
/// `objects/info/alternates` (read only; its new objects stay in the clone). The user's
/// repository gets the branch at the base if it lacks it, nothing more: a tool in the
/// sandbox can write the clone, never the user's `.git`. A worktree left there by a local
/// Run gives way to the clone when it holds no uncommitted work (its commits are on the
/// branch).
pub(crate) fn prepare_clone(job: &Job, worktrees_dir: &Path) -> Result<Workspace> {
    let user =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    if let Some(lock) = clear_branch_lock(&user, &branch_name) {
        tracing::warn!("{}: removed {lock}, left by a killed git", job.repo);
    }
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
    clear_half_made(&path)?;
    if path.exists() {
        let ws = Workspace::open(&path, job)?;
        if ws.is_clone() {
            if ws.branch != branch_name {
                bail!("the clone {} is not on {branch_name}", path.display());
            }
            ws.warn_of_stale_locks();
            return Ok(ws);
        }
        if ws.is_dirty()? {
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
    // owl's own config, the one every seal puts back.
    let config = clone.path().join("config");
    std::fs::write(&config, seal::CONFIG)
        .with_context(|| format!("writing {}", config.display()))?;
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
    drop(clone);
    Workspace::open(&path, job)
}

/// Removes a working copy a killed tick left half-made, so that it is made again: nothing
/// ran there, and the branch is the truth.
fn clear_half_made(path: &Path) -> Result<()> {
    if half_made(path) {
        tracing::warn!("{} was left half-made; making it again", path.display());
        std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

/// Whether the working copy at `path` is one a killed tick left half-made: its `.git` is
/// missing, empty, or leads to no git directory (a worktree's file cut short, a clone
/// killed in its init), or its git directory has no index yet (a checkout cut short, which
/// the safety net would otherwise commit as the deletion of every file not yet written).
/// No Run worked there (a Run's working copy always has both), so it holds no work; a
/// `.git` symlink is not this (a sandboxed agent's: see the seal).
fn half_made(path: &Path) -> bool {
    if !path.is_dir() {
        return false;
    }
    let git = path.join(".git");
    let unmade = |dir: &Path| !dir.join("HEAD").is_file() || !dir.join("index").is_file();
    match std::fs::symlink_metadata(&git) {
        Err(_) => true,
        Ok(meta) if meta.is_file() => {
            let text = crate::untrusted::read_to_string(&git, 4096).unwrap_or_default();
            match text.trim().strip_prefix("gitdir:") {
                Some(dir) => unmade(Path::new(dir.trim())),
                None => true,
            }
        }
        Ok(meta) if meta.is_dir() => unmade(&git),
        Ok(_) => false,
    }
}

/// Removes the lock of the Job's own branch a killed git left (owl's while it made or
/// published the branch, or a killed Run's commit): only owl and the Job's Runs write that
/// branch, and none of them lives while the tick lock is held and the Job is not running.
fn clear_branch_lock(repo: &Repository, branch: &str) -> Option<String> {
    let name = format!("refs/heads/{branch}.lock");
    remove_lock(&repo.commondir().join(&name)).then_some(name)
}

/// Removes a lock file if there is one; a symlink is removed, never what it points to.
fn remove_lock(lock: &Path) -> bool {
    std::fs::symlink_metadata(lock).is_ok_and(|m| !m.is_dir()) && std::fs::remove_file(lock).is_ok()
}

/// Removes a file, a symlink (never what it points to) or a directory tree.
fn remove_entry(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
    .with_context(|| format!("removing {}", path.display()))
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

/// What the Job's branch holds beyond its base, for `owl show`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BranchSummary {
    pub commits: usize,
    pub files_changed: usize,
    pub insertions: usize,
    pub deletions: usize,
}

/// Counts the commits on the Job's branch that its base does not have, and their diffstat.
pub(crate) fn branch_summary(job: &Job) -> Result<Option<BranchSummary>> {
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
    // A blob over a MiB is counted as binary, never loaded: the agent chose its size.
    let mut options = git2::DiffOptions::new();
    options.max_size(1 << 20);
    let diff = repo.diff_tree_to_tree(
        Some(&repo.find_commit(merge_base)?.tree()?),
        Some(&head.tree()?),
        Some(&mut options),
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

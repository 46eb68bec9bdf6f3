//! Making a Job's working copy: a worktree of the user's repository on its branch, or a clone of its own, made again when a killed tick left it half-made.

use super::*;

/// The longest a tick waits for another's worktree add (each takes milliseconds).
const ADD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Creates the Job's branch from its base ref and its worktree, or reuses both.
pub(crate) fn prepare(job: &Job, worktrees_dir: &Path, author: &str) -> Result<Workspace> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    if let Some(lock) = clear_branch_lock(&repo, &branch_name) {
        tracing::warn!("{}: removed {lock}, left by a killed git", job.repo);
    }
    let branch = match repo.find_branch(&branch_name, BranchType::Local) {
        Ok(b) => b,
        Err(_) => {
            start_branch(&repo, job, author)?;
            repo.find_branch(&branch_name, BranchType::Local)?
        }
    };
    let path = worktree_path(worktrees_dir, &job.id);
    clear_half_made(&path)?;
    if path.exists() {
        return match existing_worktree(job, &path, &branch_name)? {
            Some(wt) => Ok(wt),
            // A sandboxed Run's clone gave way: made again as a worktree.
            None => prepare(job, worktrees_dir, author),
        };
    }
    add(&repo, job, worktrees_dir, branch)
}

/// Adds the Job's worktree on its `branch`, clearing what a killed tick left of it.
fn add(
    repo: &Repository,
    job: &Job,
    worktrees_dir: &Path,
    branch: git2::Branch,
) -> Result<Workspace> {
    let path = worktree_path(worktrees_dir, &job.id);
    let branch_name = job.branch();
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
    // One add at a time among this state dir's ticks: while another Job's worktree is being
    // added, libgit2 can list its registration and fail to read it, and takes that failure
    // for this Job's branch being checked out (`git_repository_foreach_worktree` keeps
    // `lookup(...) < 0`, that is 1, as its answer): "reference … is already checked out".
    // CI saw it with sixteen ticks at once. An add takes milliseconds.
    let lock = worktrees_dir.with_file_name("worktrees.lock");
    let _adding = crate::lock::within(&lock, ADD_WAIT)?.with_context(|| {
        format!(
            "another tick held {} for {} s while adding a worktree",
            lock.display(),
            ADD_WAIT.as_secs()
        )
    })?;
    // libgit2 makes `.git/worktrees` with an exclusive mkdir and fails when it exists by
    // the time it makes it: two ticks adding their first worktrees of one repository side
    // by side would race there. Made beforehand, it is always there.
    let registrations = repo.commondir().join("worktrees");
    std::fs::create_dir_all(&registrations)
        .with_context(|| format!("making {}", registrations.display()))?;
    let reference = branch.into_reference();
    repo.worktree(
        &name,
        &path,
        Some(WorktreeAddOptions::new().reference(Some(&reference))),
    )
    .with_context(|| format!("adding worktree {} on {branch_name}", path.display()))?;
    Workspace::open(&path, job)
}

/// The Job's worktree already there: reused when it is on the Job's branch; `None` when it
/// was a sandboxed Run's clone, whose work was brought back and which gave way.
fn existing_worktree(job: &Job, path: &Path, branch_name: &str) -> Result<Option<Workspace>> {
    let wt = Workspace::open(path, job)
        .with_context(|| format!("{} exists but is not a git worktree", path.display()))?;
    if wt.is_clone() {
        // A sandboxed Run's clone: its work is brought back first, then it gives way.
        wt.publish(job, None, None)?;
        if wt.is_dirty()? {
            bail!(
                "the clone {} has uncommitted changes from a sandboxed Run; commit them \
                 before a local Run takes the Job",
                path.display()
            );
        }
        drop(wt);
        std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))?;
        return Ok(None);
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
    Ok(Some(wt))
}

/// Creates the Job's own clone for a sandboxed Run, or reuses it: a repository of its own
/// at the Job's worktree path, on the Job's branch, which reads the user's objects through
/// `objects/info/alternates` (read only; its new objects stay in the clone). The user's
/// repository gets the branch at the base if it lacks it, nothing more: a tool in the
/// sandbox can write the clone, never the user's `.git`. A worktree left there by a local
/// Run gives way to the clone when it holds no uncommitted work (its commits are on the
/// branch).
pub(crate) fn prepare_clone(job: &Job, worktrees_dir: &Path, author: &str) -> Result<Workspace> {
    let user =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    if let Some(lock) = clear_branch_lock(&user, &branch_name) {
        tracing::warn!("{}: removed {lock}, left by a killed git", job.repo);
    }
    let start = match user.find_branch(&branch_name, BranchType::Local) {
        Ok(b) => b.get().peel_to_commit()?,
        Err(_) => start_branch(&user, job, author)?,
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
pub(super) fn clear_half_made(path: &Path) -> Result<()> {
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
pub(super) fn half_made(path: &Path) -> bool {
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
pub(super) fn clear_branch_lock(repo: &Repository, branch: &str) -> Option<String> {
    let name = format!("refs/heads/{branch}.lock");
    remove_lock(&repo.commondir().join(&name)).then_some(name)
}

/// Removes a lock file if there is one; a symlink is removed, never what it points to.
pub(super) fn remove_lock(lock: &Path) -> bool {
    std::fs::symlink_metadata(lock).is_ok_and(|m| !m.is_dir()) && std::fs::remove_file(lock).is_ok()
}

/// Removes a file, a symlink (never what it points to) or a directory tree.
pub(super) fn remove_entry(path: &Path) -> Result<()> {
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
pub(super) fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

pub(super) fn worktree_name(job_id: &str) -> String {
    format!("owl-{job_id}")
}

/// Makes the Job's branch at its base. A Handoff the base already holds (a stacked Job's
/// base is where the Job it waits for said `status: done`; a branch of owl's merged into
/// main leaves one too) is not this Job's: owl commits its removal first, so that only the
/// Job's own Runs can say it is done.
fn start_branch<'r>(repo: &'r Repository, job: &Job, author: &str) -> Result<git2::Commit<'r>> {
    let branch_name = job.branch();
    let base = repo
        .revparse_single(job.base_commit.as_deref().unwrap_or(&job.base))
        .and_then(|o| o.peel_to_commit())
        .with_context(|| format!("resolving base '{}' in {}", job.base, job.repo))?;
    let start = match without_handoff(repo, &base, author)? {
        Some(start) => start,
        None => base,
    };
    repo.branch(&branch_name, &start, false)
        .with_context(|| format!("creating branch {branch_name} in {}", job.repo))?;
    Ok(start)
}

/// A commit on `base` that removes its Handoff; `None` when it holds none.
fn without_handoff<'r>(
    repo: &'r Repository,
    base: &git2::Commit<'r>,
    author: &str,
) -> Result<Option<git2::Commit<'r>>> {
    let tree = base.tree()?;
    if tree.get_path(Path::new(HANDOFF_PATH)).is_err() {
        return Ok(None);
    }
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.remove(HANDOFF_PATH);
    let without = repo.find_tree(update.create_updated(repo, &tree)?)?;
    let (name, email) = super::parse_author(author);
    let sig = git2::Signature::now(&name, &email)?;
    let message = "owl: start without the base's Handoff, which is not this Job's";
    let id = repo.commit(None, &sig, &sig, message, &without, &[base])?;
    Ok(Some(repo.find_commit(id)?))
}

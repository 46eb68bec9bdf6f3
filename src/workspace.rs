//! git2: the branch `owl/<job-id>` and the worktree per Job (ADR-0007), and reading the Handoff at the branch head.

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

/// Creates the Job's branch from its base ref and its worktree, or reuses both.
pub fn prepare(job: &Job, worktrees_dir: &Path) -> Result<PathBuf> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let branch_name = job.branch();
    let branch = match repo.find_branch(&branch_name, BranchType::Local) {
        Ok(b) => b,
        Err(_) => {
            let base = repo
                .revparse_single(&job.base)
                .and_then(|o| o.peel_to_commit())
                .with_context(|| format!("resolving base '{}' in {}", job.base, job.repo))?;
            repo.branch(&branch_name, &base, false)
                .with_context(|| format!("creating branch {branch_name} in {}", job.repo))?
        }
    };
    let path = worktree_path(worktrees_dir, &job.id);
    if path.exists() {
        let wt = Repository::open(&path)
            .with_context(|| format!("{} exists but is not a git worktree", path.display()))?;
        let head = wt.head().ok().and_then(|h| h.shorthand().map(String::from));
        if head.as_deref() != Some(branch_name.as_str()) {
            bail!(
                "worktree {} is on {}, not on {branch_name}",
                path.display(),
                head.unwrap_or_else(|| "a detached HEAD".into())
            );
        }
        return Ok(path);
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
    std::fs::create_dir_all(worktrees_dir)
        .with_context(|| format!("creating {}", worktrees_dir.display()))?;
    let reference = branch.into_reference();
    repo.worktree(
        &name,
        &path,
        Some(WorktreeAddOptions::new().reference(Some(&reference))),
    )
    .with_context(|| format!("adding worktree {} on {branch_name}", path.display()))?;
    Ok(path)
}

fn worktree_name(job_id: &str) -> String {
    format!("owl-{job_id}")
}

/// The Handoff committed at the head of the Job's branch: `Ok(None)` when there is none.
pub fn read_handoff(job: &Job) -> Result<Option<String>> {
    let repo =
        Repository::open(&job.repo).with_context(|| format!("opening repository {}", job.repo))?;
    let Ok(branch) = repo.find_branch(&job.branch(), BranchType::Local) else {
        return Ok(None);
    };
    let tree = branch.get().peel_to_tree()?;
    let Ok(entry) = tree.get_path(Path::new(HANDOFF_PATH)) else {
        return Ok(None);
    };
    let blob = entry.to_object(&repo)?.peel_to_blob()?;
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
    let base = repo.revparse_single(&job.base)?.peel_to_commit()?;
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

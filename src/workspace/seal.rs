//! Sealing a Job's own clone after a sandboxed Run: what the agent could plant in its `.git` to redirect owl, or to run as the user outside the sandbox, is refused or undone before anything opens it.
//!
//! The agent writes the whole clone, `.git` included. Outside the sandbox owl commits there,
//! reads its branch and fetches it into the user's repository, and in the morning the user
//! runs git there: a symlink or a `commondir` would redirect those writes into the user's
//! repository, `core.worktree` would make the work tree the user's home, and
//! `core.fsmonitor`, `core.hooksPath`, filters, hooks or an `include` would run a command.
//! A link or a special file anywhere in `.git` is refused whole (the clone is kept, as it
//! is, for the user to look at); the rest owl owns and puts back as it made it.

use std::path::{Path, PathBuf};

/// The config owl writes into a clone it makes, and puts back after every sandboxed Run.
pub(super) const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// Keys of the agent's own config kept through a seal: they name who commits, nothing runs.
const KEPT: &[&str] = &["user.name", "user.email"];

/// Files in `.git` that send git elsewhere: to another common dir, another work tree,
/// other objects, another history. owl makes none of them.
const REDIRECTS: &[&str] = &[
    "commondir",
    "gitdir",
    "config.worktree",
    "info/grafts",
    "objects/info/http-alternates",
    "modules",
];

/// The largest `.git/config` read; a bigger one is replaced unread.
const CONFIG_CAP: u64 = 1 << 20;

/// Why a clone's `.git` cannot be opened by owl at all.
#[derive(Debug, thiserror::Error)]
#[error("the clone {clone} was tampered with: {what}; owl neither commits there nor brings its branch home")]
pub(crate) struct Tampered {
    pub(crate) clone: String,
    pub(crate) what: String,
}

/// Checks the clone at `clone` and puts back what owl owns of its `.git`: its config, its
/// hooks, its alternates (which must name `user_objects` alone). Returns what was undone,
/// each in a few words (`core.fsmonitor`, `hooks/pre-commit`), for the Run's note.
pub(super) fn seal(clone: &Path, user_objects: &Path) -> Result<Vec<String>, Tampered> {
    let tampered = |what: String| Tampered {
        clone: clone.display().to_string(),
        what,
    };
    let git = clone.join(".git");
    let meta = std::fs::symlink_metadata(&git).map_err(|e| tampered(format!(".git: {e}")))?;
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(&git).unwrap_or_default();
        return Err(tampered(format!(".git is a symlink to {}", to.display())));
    }
    if !meta.is_dir() {
        return Err(tampered(".git is not a directory".into()));
    }
    if let Some(odd) = first_odd_entry(&git) {
        return Err(tampered(odd));
    }
    let mut undone = Vec::new();
    undone.extend(seal_config(&git).map_err(|e| tampered(format!("its config: {e}")))?);
    undone.extend(remove_hooks(&git).map_err(|e| tampered(format!("its hooks: {e}")))?);
    for redirect in REDIRECTS {
        let path = git.join(redirect);
        if std::fs::symlink_metadata(&path).is_ok() {
            remove(&path).map_err(|e| tampered(format!("{redirect}: {e}")))?;
            undone.push(redirect.to_string());
        }
    }
    let alternates = git.join("objects/info/alternates");
    let wanted = format!("{}\n", user_objects.display());
    let found = crate::untrusted::read_to_string(&alternates, 4096).ok();
    if found.as_deref() != Some(wanted.as_str()) {
        replace(&alternates, &wanted)
            .map_err(|e| tampered(format!("objects/info/alternates: {e}")))?;
        undone.push("objects/info/alternates".into());
    }
    Ok(undone)
}

/// Removes the `.git` of every submodule path in the clone's index: a repository the Run
/// made there (or a gitfile or link to one) has a config of its own, which git in the clone
/// runs when it looks into its submodules. owl never makes one; the submodule's commit
/// stays recorded in the tree. Returns `<path>/.git` for each.
pub(super) fn remove_nested(repo: &git2::Repository, clone: &Path) -> std::io::Result<Vec<String>> {
    let Ok(index) = repo.index() else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for entry in index.iter().filter(|e| e.mode == 0o160000) {
        let rel = PathBuf::from(String::from_utf8_lossy(&entry.path).into_owned());
        // Only a path inside the clone along real directories: a symlink on the way could
        // lead this removal anywhere the user can write.
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        let mut dir = clone.to_path_buf();
        let inside = rel.components().all(|c| {
            dir.push(c);
            std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
        });
        let git = dir.join(".git");
        if inside && std::fs::symlink_metadata(&git).is_ok() {
            remove(&git)?;
            removed.push(format!("{}/.git", rel.display()));
        }
    }
    Ok(removed)
}

/// The first symlink or special file under `.git`, said as `refs is a symlink`.
fn first_odd_entry(git: &Path) -> Option<String> {
    let mut dirs = vec![git.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => return Some(format!("{}: {e}", shown(git, &dir))),
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                return Some(format!("{} cannot be read", shown(git, &path)));
            };
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_symlink() {
                return Some(format!("{} is a symlink", shown(git, &path)));
            } else if !kind.is_file() {
                return Some(format!("{} is not a regular file", shown(git, &path)));
            }
        }
    }
    None
}

fn shown(git: &Path, path: &Path) -> String {
    Path::new(".git")
        .join(path.strip_prefix(git).unwrap_or(path))
        .display()
        .to_string()
}

/// Puts owl's config back, keeping only who commits; returns the keys it dropped.
fn seal_config(git: &Path) -> std::io::Result<Vec<String>> {
    let path = git.join("config");
    let text = crate::untrusted::read_to_string(&path, CONFIG_CAP).unwrap_or_default();
    if text == CONFIG {
        return Ok(Vec::new());
    }
    let ours = entries(CONFIG);
    let mut kept = String::new();
    let mut dropped: Vec<String> = Vec::new();
    for (key, value) in entries(&text) {
        if KEPT.contains(&key.as_str()) && value.chars().all(|c| !c.is_control()) {
            kept.push_str(&format!("\t{} = {value}\n", &key["user.".len()..]));
        } else if !ours.contains(&(key.clone(), value)) && !dropped.contains(&key) {
            dropped.push(key);
        }
    }
    let mut config = CONFIG.to_string();
    if !kept.is_empty() {
        config.push_str("[user]\n");
        config.push_str(&kept);
    }
    replace(&path, &config)?;
    Ok(dropped.into_iter().map(|k| format!("config {k}")).collect())
}

/// The `section.key` names and raw values of a git config, for telling what it sets. Not a
/// full parser: what it misreads is dropped with the rest when the config is put back.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut found = Vec::new();
    for line in text.lines() {
        let mut line = line.trim();
        if line.starts_with('[') {
            let Some(end) = line.find(']') else { continue };
            section = section_name(&line[1..end]);
            line = line[end + 1..].trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        found.push((
            format!("{section}.{}", key.trim().to_ascii_lowercase()),
            value.trim().to_string(),
        ));
    }
    found
}

/// `core`, `filter "lfs"` → `filter.lfs`, `Remote.Origin` → `remote.origin`.
fn section_name(header: &str) -> String {
    match header.split_once(char::is_whitespace) {
        Some((name, sub)) => format!(
            "{}.{}",
            name.to_ascii_lowercase(),
            sub.trim().trim_matches('"')
        ),
        None => header.trim().to_ascii_lowercase(),
    }
}

/// Removes every hook (what is not a `.sample`); returns `hooks/<name>` for each.
fn remove_hooks(git: &Path) -> std::io::Result<Vec<String>> {
    let hooks = git.join("hooks");
    let Ok(entries) = std::fs::read_dir(&hooks) else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for entry in entries {
        let path: PathBuf = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.ends_with(".sample") {
            removed.push(format!("hooks/{name}"));
            remove(&path)?;
        }
    }
    removed.sort();
    Ok(removed)
}

/// Writes a new file in the place of `path`, never through it: whatever the agent left
/// there (a hard link to another file of the user's, say) is unlinked, not overwritten.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(text.as_bytes())
}

fn remove(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gitlink(path: &str) -> git2::IndexEntry {
        git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o160000,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: git2::Oid::from_str("1234567890123456789012345678901234567890").unwrap(),
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_repository_at_a_submodule_path_is_removed_but_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let clone = dir.path().join("clone");
        let repo = git2::Repository::init(&clone).unwrap();
        // What stands for the user's repository, outside the clone, behind a link in it.
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(outside.join("x/.git")).unwrap();
        std::os::unix::fs::symlink(&outside, clone.join("link")).unwrap();
        std::fs::create_dir_all(clone.join("sub/.git")).unwrap();
        std::fs::write(clone.join("sub/.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        let mut index = repo.index().unwrap();
        for path in ["link/x", "sub", "../outside/x"] {
            index.add(&gitlink(path)).unwrap_or_default();
        }
        index.write().unwrap();
        assert!(index.get_path(Path::new("link/x"), 0).is_some());
        let removed = remove_nested(&repo, &clone).unwrap();
        assert_eq!(removed, ["sub/.git"]);
        assert!(!clone.join("sub/.git").exists());
        assert!(
            outside.join("x/.git").is_dir(),
            "followed a symlink out of the clone"
        );
    }

    #[test]
    fn config_entries_are_named_by_section_and_key() {
        let text = "[core]\n\tfsmonitor = touch /tmp/x\n[filter \"lfs\"]\n\tclean = x\n\
                    [user] name = Agent\n; a comment\n[Include]\n\tpath = ../x\n";
        let keys: Vec<String> = entries(text).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "core.fsmonitor",
                "filter.lfs.clean",
                "user.name",
                "include.path"
            ]
        );
    }

    #[test]
    fn a_planted_config_is_put_back_keeping_who_commits() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::write(
            git.join("config"),
            format!(
                "{CONFIG}\tworktree = /root\n\tfsmonitor = sh -c 'id'\n[user]\n\temail = a@b\n"
            ),
        )
        .unwrap();
        let dropped = seal_config(git).unwrap();
        assert_eq!(dropped, ["config core.worktree", "config core.fsmonitor"]);
        let text = std::fs::read_to_string(git.join("config")).unwrap();
        assert_eq!(text, format!("{CONFIG}[user]\n\temail = a@b\n"));
        // A config that is a hard link to another file is replaced, the other left as it is.
        let other = git.join("other");
        std::fs::write(&other, "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::remove_file(git.join("config")).unwrap();
        std::fs::hard_link(&other, git.join("config")).unwrap();
        assert_eq!(seal_config(git).unwrap(), ["config core.fsmonitor"]);
        assert_eq!(
            std::fs::read_to_string(&other).unwrap(),
            "[core]\n\tfsmonitor = x\n"
        );
        // Sealed once, it says nothing more.
        assert!(seal_config(git).unwrap().is_empty());
    }
}

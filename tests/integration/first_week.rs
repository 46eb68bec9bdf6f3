//! The first week, as a new user lives it (issue 36): every word true, every step works as
//! printed, nothing waits behind another.

use crate::support::TestEnv;

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn add_from_a_subdirectory_takes_the_repository_git_would_and_says_so() {
    let env = TestEnv::new();
    let sub = env.repo.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let top = env.repo.canonicalize().unwrap();
    // From the subdirectory, as cwd.
    let out = env
        .owl_std()
        .current_dir(&sub)
        .args(["add", "From below"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(env.show(&id)["repo"], top.display().to_string());
    let said = stderr_of(&out);
    assert!(
        said.contains("is inside the repository") && said.contains(&top.display().to_string()),
        "{said}"
    );
    // And as --repo.
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&sub)
        .arg("With --repo")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(env.show(&id)["repo"], top.display().to_string());
}

#[test]
fn no_helper_process_starts_in_the_callers_directory() {
    let env = TestEnv::new();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Run from inside the repository");
    // A person runs the tick by hand from inside their repository.
    let out = env
        .owl_std()
        .current_dir(&env.repo)
        .args(["tick", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = env
        .owl_std()
        .current_dir(&env.repo)
        .args(["doctor"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let calls = env.recorded("helper-cwd.txt");
    assert!(
        calls.contains("--version") && calls.contains("auth status"),
        "{calls}"
    );
    let repo = env.repo.display().to_string();
    for call in calls.lines() {
        assert!(
            !call.ends_with(&repo),
            "a helper started in the caller's directory: {call}"
        );
    }
}

//! The JSON contract (docs/json.md, docs/schemas/): real outputs of every command checked
//! against their schemas, and the page checked to name every field of every schema.

use serde_json::Value;

use crate::support::assert_schema;

fn json_of(env: &crate::support::TestEnv, args: &[&str]) -> Value {
    let out = env.owl().args(args).output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn every_commands_json_over_a_night_keeps_its_schema() {
    let (env, ids, ticks) = crate::report::night_with_ticks();
    for tick in &ticks {
        assert_schema("tick", tick);
    }
    assert_schema("tick", &json_of(&env, &["tick", "--dry-run", "--json"]));
    assert_schema("status", &json_of(&env, &["status", "--json"]));
    assert_schema("jobs", &json_of(&env, &["jobs", "--all", "--json"]));
    for id in &ids {
        assert_schema("show", &json_of(&env, &["show", id, "--json"]));
    }
    assert_schema(
        "report",
        &json_of(&env, &["report", "--since", "3h", "--json"]),
    );
    // A Run in progress, for status's `running`.
    let env = crate::support::TestEnv::new();
    env.script(&crate::support::held_run_script(&env.release_file(), ""));
    env.add("Held");
    let tick = env.spawn_tick();
    env.wait_running();
    let status = json_of(&env, &["status", "--json"]);
    assert!(status["running"].is_object(), "{status}");
    assert_schema("status", &status);
    env.release();
    let out = tick.wait_with_output().unwrap();
    assert_schema("tick", &serde_json::from_slice(&out.stdout).unwrap());
}

#[test]
fn a_renamed_field_breaks_the_schema() {
    let (env, _, ticks) = crate::report::night_with_ticks();
    let mut tick = ticks[0].clone();
    let value = tick["job_state"].take();
    tick.as_object_mut().unwrap().remove("job_state");
    tick["state"] = value;
    let caught = std::panic::catch_unwind(|| assert_schema("tick", &tick));
    assert!(caught.is_err(), "a renamed field must fail");
    drop(env);
}

/// Every field of every schema, as `path.field`.
fn fields(schema: &Value, path: &str, out: &mut Vec<String>) {
    let schema = schema.get("anyOf").and_then(|a| a.get(0)).unwrap_or(schema);
    if schema["type"] == "array" {
        return fields(&schema["items"], path, out);
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, v) in props {
            out.push(format!("{path}{k}"));
            fields(v, &format!("{path}{k}."), out);
        }
    }
}

#[test]
fn the_page_names_every_field_of_every_schema() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs");
    let page = std::fs::read_to_string(format!("{dir}/json.md")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(format!("{dir}/schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "check",
            "conformance",
            "doctor",
            "jobs",
            "notify",
            "report",
            "show",
            "status",
            "tick"
        ]
        .map(|n| format!("{n}.schema.json"))
    );
    for name in names {
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{dir}/schemas/{name}")).unwrap(),
        )
        .unwrap();
        let mut all = Vec::new();
        fields(&schema, "", &mut all);
        assert!(!all.is_empty(), "{name}");
        for f in all {
            assert!(
                page.contains(&format!("| `{f}` |")),
                "docs/json.md lacks `{f}` of {name}"
            );
        }
    }
}

//! owl through PgBouncer: in transaction mode, where each transaction may get another server connection, a Run is supervised and recorded and owl leaves no setting on a server connection for the pooler's next client; in session mode too.

use std::sync::Arc;

use crate::support::pg_server::{self, Database};
use crate::support::{finish, held_run_script, TestEnv};

/// alpha's config with its store reached through the PgBouncer at `port`.
fn through_bouncer(db: &Arc<Database>, port: u16) -> TestEnv {
    let env = TestEnv::machine(db, "alpha", &["work"], "leaseLength: 10s\n");
    let through = format!("postgres://owl@127.0.0.1:{port}/{}", db.name);
    let config = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(&env.config, config.replace(&db.url(), &through)).unwrap();
    env
}

/// What another client of the pooler finds on the server connection: its waits.
fn settings_seen_through(port: u16, db: &Database) -> (String, String) {
    let mut client = postgres::Client::connect(
        &format!(
            "host=127.0.0.1 port={port} user=owl password={} dbname={}",
            pg_server::PASSWORD,
            db.name
        ),
        postgres::NoTls,
    )
    .unwrap();
    let show = |client: &mut postgres::Client, what: &str| -> String {
        client
            .simple_query(&format!("SHOW {what}"))
            .unwrap()
            .into_iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .unwrap()
    };
    (
        show(&mut client, "lock_timeout"),
        show(&mut client, "statement_timeout"),
    )
}

/// A Run through `port`, held until the test has looked; its outcome.
fn a_held_run(env: &TestEnv, looked: impl FnOnce()) -> serde_json::Value {
    env.script(&held_run_script(
        &env.release_file(),
        "write .owl/handoff.md status: done\\n\ncommit handoff\n",
    ));
    let job = env.add("Through the pooler");
    let tick = env.spawn_tick();
    env.wait_running();
    looked();
    env.release();
    let out = finish(tick);
    assert_eq!(out["outcome"], "succeeded", "{out}");
    let shown = env.show(&job);
    assert_eq!(shown["state"], "done", "{shown}");
    shown
}

#[test]
fn a_run_through_pgbouncer_in_transaction_mode_leaves_no_setting_for_the_next_client() {
    // One server connection for every client: whatever owl left on it, the next one gets.
    let port = pg_server::bouncer_of("transaction", 1);
    let db = Arc::new(Database::new());
    let env = through_bouncer(&db, port);
    let untouched = ("0".to_string(), "0".to_string());
    let shown = a_held_run(&env, || {
        // Under supervision owl's waits are shorter (a lease must not wait on a lock):
        // they are its transactions' own, not the connection's.
        assert_eq!(settings_seen_through(port, &db), untouched);
    });
    assert_eq!(shown["runs"].as_array().unwrap().len(), 1, "{shown}");
    assert_eq!(settings_seen_through(port, &db), untouched);
}

#[test]
fn a_run_through_pgbouncer_in_session_mode_is_supervised_and_recorded() {
    let port = pg_server::bouncer_of("session", 4);
    let db = Arc::new(Database::new());
    let env = through_bouncer(&db, port);
    let shown = a_held_run(&env, || {});
    assert_eq!(shown["runs"][0]["outcome"], "succeeded", "{shown}");
}

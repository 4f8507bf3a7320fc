//! `orq api` on a Redis whose password is changed under it (a rotation done in the wrong order),
//! as a real process: `/readyz` answers 503 `store_unavailable` naming the authentication
//! refusal, the API recovers by itself once the configured password works again, the episode is
//! logged once when it begins and once when it ends (not once per attempt), and the password,
//! given in `ORQ_REDIS_URL` (never on the command line), appears in no log line or answer
//! (issue 42, item 10).

mod roles;

use orq::testing::RedisServer;
use roles::{free_listen_addr, wait_for, wait_ready, Proc};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The password orq is configured with.
const PASSWORD: &str = "orq-Secret-1";

/// The password set on the server first by a rotation done in the wrong order.
const ROTATED: &str = "rotated-Secret-2";

/// `args` on a connection of the test's own to the server on `port`.
fn on(conn: &mut redis::Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<redis::Value>(conn)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

// Goal: the reproduction, end to end: with the password changed and the connections
// killed, /readyz goes 503 store_unavailable and says the store refused orq's credentials
// (without the password); once the password is the configured one again, /readyz is 200 again
// without a restart. The log has one warning for the episode's start and one info line for its
// end, however many attempts it made, and no line shows the password. Method: a private Redis
// with requirepass; `orq api` with ORQ_REDIS_URL=redis://:PASSWORD@…, its stderr read on a
// thread; CONFIG SET another password and CLIENT KILL TYPE normal on the test's own connection
// (which stays authenticated); poll /readyz (many attempts meanwhile); set the password back;
// poll /readyz until ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_refused_password_and_the_api_recovers_once_it_works() {
    let server = RedisServer::start();
    let mut admin = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    on(&mut admin, &["CONFIG", "SET", "requirepass", PASSWORD]);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/", server.port());
    let listen = free_listen_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["api", "--listen", &listen])
        .env("ORQ_REDIS_URL", &url)
        .env("ORQ_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn orq api");
    let mut api = Proc(Some(child));
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let stderr = api.0.as_mut().unwrap().stderr.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;

    on(&mut admin, &["CONFIG", "SET", "requirepass", ROTATED]);
    on(
        &mut admin,
        &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"],
    );
    let refused = wait_for("/readyz to name the refused password", async || {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        let status = r.status().as_u16();
        let body: Value = r.json().await.ok()?;
        let message = body["error"]["message"].as_str().unwrap_or_default();
        (status == 503 && message.contains("WRONGPASS")).then_some(body)
    })
    .await;
    assert_eq!(refused["error"]["code"], "store_unavailable", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("authentication failed"), "{message}");
    // More attempts during the episode: they must not add log lines.
    for _ in 0..15 {
        let r = http.get(format!("{base}/readyz")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 503);
        let text = r.text().await.unwrap();
        assert!(
            !text.contains(PASSWORD) && !text.contains(ROTATED),
            "{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    on(&mut admin, &["CONFIG", "SET", "requirepass", PASSWORD]);
    wait_ready(&http, &base).await;
    let server_at = format!("the Redis server at 127.0.0.1:{}", server.port());
    wait_for("the log line of the episode's end", async || {
        let lines = lines.lock().unwrap();
        lines
            .iter()
            .any(|l| l.contains(&format!("connected to {server_at} again")))
            .then_some(Value::Null)
    })
    .await;
    api.kill();
    let lines = lines.lock().unwrap();
    let began: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(&format!("cannot connect to {server_at}")))
        .collect();
    assert_eq!(began.len(), 1, "one warning for the episode: {began:#?}");
    assert!(began[0].contains("WRONGPASS"), "{}", began[0]);
    let ended = lines
        .iter()
        .filter(|l| l.contains(&format!("connected to {server_at} again")))
        .count();
    assert_eq!(ended, 1, "one line for the episode's end: {lines:#?}");
    for l in lines.iter() {
        assert!(
            !l.contains(PASSWORD) && !l.contains(ROTATED),
            "a log line shows a password: {l}"
        );
    }
}

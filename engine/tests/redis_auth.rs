//! A Redis that refuses orq's credentials for a while (a password rotated in the wrong order, a
//! Redis that starts before its ACL file is loaded): the store's calls fail with a transient
//! error that names the authentication refusal, and the store answers again as soon as the
//! configured password works, on one server and on a Redis Cluster (issue 42, item 10); the
//! password appears in no `Debug` output and no error text.
//!
//! Each test starts its own servers without a password, then sets one with `CONFIG SET
//! requirepass` on a connection of its own (which stays authenticated through the changes: Redis
//! keeps a connection's authentication when the password changes), and breaks the store's
//! connections with `CLIENT KILL TYPE normal SKIPME yes`. Conditions are polled with a generous
//! deadline; no test asserts on elapsed time.

mod common;

use common::{eventually, spec};
use orq::testing::{RedisCluster, RedisSentinel, RedisServer};
use orq::{Client, Entropy, Error, RedisStore, Store, SystemClock, Transient};
use std::sync::Arc;

/// The password the store is configured with.
const PASSWORD: &str = "orq-Secret-1";

/// The password a rotation done in the wrong order sets on the server first.
const ROTATED: &str = "rotated-Secret-2";

/// A client on `store`.
fn client_on(store: Arc<dyn Store>) -> Client {
    Client::new(store, Arc::new(SystemClock), Arc::new(Entropy::from_os()))
}

/// A connection of the test's own to the server on `port` (made before any password is set).
async fn admin(port: u16) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_multiplexed_async_connection()
        .await
        .expect("the test's own connection")
}

/// `CONFIG SET requirepass password` on `conn`'s server.
async fn set_password(conn: &mut redis::aio::MultiplexedConnection, password: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(password)
        .query_async(conn)
        .await
        .expect("CONFIG SET requirepass");
}

/// Close every client connection of `conn`'s server but `conn` (the store's among them).
async fn kill_the_others(conn: &mut redis::aio::MultiplexedConnection) {
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(conn)
        .await
        .expect("CLIENT KILL");
}

/// `ACL SETUSER orq on resetpass >password ~* &* +@all` on `conn`'s server: the user orq's
/// stores log in as, with `password` alone.
async fn set_user(conn: &mut redis::aio::MultiplexedConnection, password: &str) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("orq")
        .arg("on")
        .arg("resetpass")
        .arg(format!(">{password}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(conn)
        .await
        .expect("ACL SETUSER");
}

/// Close the connections of ACL user `orq` on `conn`'s server.
async fn kill_user_orq(conn: &mut redis::aio::MultiplexedConnection) {
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("orq")
        .query_async(conn)
        .await
        .expect("CLIENT KILL USER");
}

/// The server's `total_connections_received` (INFO stats): it grows with each connection
/// attempt, refused ones included.
async fn connections_received(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .expect("INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received")
}

/// Assert that `text` shows neither password.
fn no_password(text: &str) {
    assert!(
        !text.contains(PASSWORD) && !text.contains(ROTATED),
        "a password is shown: {text}"
    );
}

/// Poll the readiness probe until it fails with a transient authentication refusal; every
/// failure on the way must be transient (an I/O error for the killed connection at most) and
/// show no password. Returns the refusal's cause.
async fn refused_transiently(client: &Client) -> Transient {
    eventually(
        "the probe to fail with an authentication refusal",
        || async {
            match client.probe_writes().await {
                Ok(()) => None,
                Err(e) => {
                    no_password(&e.to_string());
                    no_password(&format!("{e:?}"));
                    assert!(e.is_unavailable(), "not transient: {e}");
                    e.transient().filter(|t| t.is_authentication())
                }
            }
        },
    )
    .await
}

// Goal: a password changed under a running store, with its connection killed, makes every call
// fail with a transient error naming the authentication refusal (never a permanent one), and
// once the configured password works again the store answers again by itself: the redis
// crate's ConnectionManager kept the first failure for good, so orq stayed down until
// restarted. Method: a private server with requirepass, a store on `redis://:PASSWORD@…`;
// CONFIG SET another password and CLIENT KILL; poll the probe until it is refused with
// WRONGPASS, check that it stays refused while the store keeps trying (the server counts its
// connection attempts),
// set the password back and poll until the probe, a submit and a get work. A store whose URL has
// no password meets NOAUTH, transient too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_is_transient_and_the_store_recovers_once_it_works() {
    let server = RedisServer::start();
    let mut admin = admin(server.port()).await;
    set_password(&mut admin, PASSWORD).await;
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/", server.port());
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.expect("connect"));
    let client = client_on(store.clone());
    client
        .probe_writes()
        .await
        .expect("ready with the password");
    let before = client
        .submit(spec("q", "echo", "{}"))
        .await
        .unwrap()
        .task
        .id;

    set_password(&mut admin, ROTATED).await;
    kill_the_others(&mut admin).await;
    assert_eq!(refused_transiently(&client).await, Transient::WrongPass);
    let attempts_before = connections_received(&mut admin).await;
    for _ in 0..5 {
        let e = client
            .get(Some("q"), &before)
            .await
            .expect_err("still refused");
        assert_eq!(e.transient(), Some(Transient::WrongPass), "{e}");
        no_password(&e.to_string());
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert!(
        connections_received(&mut admin).await > attempts_before,
        "the store makes connection attempts while refused"
    );
    let Err(Error::Unavailable { cause, .. }) = client.submit(spec("q", "echo", "{}")).await else {
        panic!("a submit must be refused as unavailable");
    };
    assert!(cause.is_authentication(), "{cause}");

    let anonymous = format!("redis://127.0.0.1:{}/", server.port());
    let without = client_on(Arc::new(RedisStore::open(&anonymous).unwrap()));
    let e = without.probe_writes().await.expect_err("no password sent");
    assert_eq!(e.transient(), Some(Transient::NoAuth), "{e}");

    set_password(&mut admin, PASSWORD).await;
    eventually("the store to answer again", || async {
        client.probe_writes().await.ok()
    })
    .await;
    let after = client
        .submit(spec("q", "echo", "{}"))
        .await
        .unwrap()
        .task
        .id;
    let t = client.get(Some("q"), &after).await.unwrap();
    assert_eq!(t.id, after);
    client
        .get(Some("q"), &before)
        .await
        .expect("the task from before");
}

// Goal: no Debug output or error text of a store shows the password of its URL, whatever the
// deployment and however the connection fails. Method: stores on one server, a cluster URL
// and a Sentinel URL, each with a password, none reachable (ports nobody listens on) and one
// whose server refuses the password; format each store, the errors of its calls and of
// finding its deployment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_debug_output_or_error_shows_the_password() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = RedisServer::start();
    let mut admin = admin(server.port()).await;
    set_password(&mut admin, ROTATED).await;
    let urls = [
        format!("redis://:{PASSWORD}@127.0.0.1:{closed}/"),
        format!("redis://orq:{PASSWORD}@127.0.0.1:{}/0", server.port()),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:{closed}"),
        format!("redis+sentinel://:{PASSWORD}@127.0.0.1:{closed}/main"),
    ];
    for url in &urls {
        let store = RedisStore::open(url).expect("a well-formed URL");
        no_password(&format!("{store:?}"));
        if let Err(e) = store.ping().await {
            no_password(&e.to_string());
            no_password(&format!("{e:?}"));
        }
        if let Err(e) = store.find_deployment().await {
            no_password(&e.to_string());
        }
        let client = client_on(Arc::new(store));
        let e = client.probe_writes().await.expect_err("cannot be ready");
        assert!(e.is_unavailable(), "{url}: {e}");
        no_password(&e.to_string());
        no_password(&format!("{e:?}"));
    }
    for bad in [
        format!("redis://:{PASSWORD}@127.0.0.1:notaport/"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:0"),
        format!("redis+sentinel://:{PASSWORD}@127.0.0.1:1"),
    ] {
        let e = RedisStore::open(&bad).expect_err(&bad);
        no_password(&e.to_string());
    }
}

// Goal: on a Redis Cluster too, a password changed on every node with the connections killed
// makes calls fail transiently, never permanently, and the store answers again once the
// password works. (The cluster client keeps no word of why it cannot reconnect: the cause reads
// UNREACHABLE, design note 69.) Method: a cluster of three primaries with
// requirepass on each, a store on `redis+cluster://:PASSWORD@…`; CONFIG SET another password
// and CLIENT KILL on every node; poll until a call fails (transient, no password shown); set
// the password back on every node and poll until calls work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_recovers_once_the_password_works_again() {
    let cluster = RedisCluster::start(3, 0);
    // The fixture's own reads connect without a password: the URL is read before one is set.
    let url = cluster.url().replacen(
        "redis+cluster://",
        &format!("redis+cluster://:{PASSWORD}@"),
        1,
    );
    let mut admins = Vec::new();
    for port in cluster.ports() {
        let mut a = admin(port).await;
        set_password(&mut a, PASSWORD).await;
        admins.push(a);
    }
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.expect("connect"));
    let client = client_on(store);
    let before = client
        .submit(spec("q", "echo", "{}"))
        .await
        .unwrap()
        .task
        .id;

    for a in &mut admins {
        set_password(a, ROTATED).await;
        kill_the_others(a).await;
    }
    let cause = eventually("a call to fail", || async {
        match client.get(Some("q"), &before).await {
            Ok(_) => None,
            Err(e) => {
                no_password(&e.to_string());
                assert!(e.is_unavailable(), "not transient: {e}");
                e.transient()
            }
        }
    })
    .await;
    println!("cluster: the first refused call's cause is {cause}");

    for a in &mut admins {
        set_password(a, PASSWORD).await;
    }
    eventually("the cluster store to answer again", || async {
        client.get(Some("q"), &before).await.ok()
    })
    .await;
    client.submit(spec("q", "echo", "{}")).await.unwrap();
}

// Goal: through Sentinel, an ACL user whose password is changed (ACL SETUSER) under a running
// store, with its connections killed, makes calls fail transiently with the refusal named
// (WRONGPASS: the primary the sentinels name refused orq's credentials), and the store finds
// the primary again once the password works. Method: a Sentinel deployment (the sentinels
// monitor with the default user, untouched), ACL user `orq` on both data servers, a store on
// `redis+sentinel://orq:PASSWORD@…`; change the user's password on both and CLIENT KILL USER
// orq; poll until a call is refused naming the authentication failure; set the password back
// and poll until calls work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_store_recovers_once_the_password_works_again() {
    let fx = RedisSentinel::start();
    let mut admins = Vec::new();
    for port in fx.server_ports() {
        let mut a = admin(port).await;
        set_user(&mut a, PASSWORD).await;
        admins.push(a);
    }
    let url = fx.url().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://orq:{PASSWORD}@"),
        1,
    );
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.expect("connect"));
    let client = client_on(store);
    let before = client
        .submit(spec("q", "echo", "{}"))
        .await
        .unwrap()
        .task
        .id;

    for a in &mut admins {
        set_user(a, ROTATED).await;
        kill_user_orq(a).await;
    }
    assert_eq!(refused_transiently(&client).await, Transient::WrongPass);

    for a in &mut admins {
        set_user(a, PASSWORD).await;
    }
    eventually("the Sentinel store to answer again", || async {
        client.get(Some("q"), &before).await.ok()
    })
    .await;
    client.submit(spec("q", "echo", "{}")).await.unwrap();
}

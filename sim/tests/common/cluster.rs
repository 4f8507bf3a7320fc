//! A private Redis Cluster used as one store by the differential tests.
//!
//! Routing: seeding commands and script calls go through the `redis` crate's sync cluster client
//! (`redis::cluster::ClusterConnection`), which sends each to the primary that owns the slot of
//! its first key (for EVAL and EVALSHA, KEYS[1]) and follows MOVED and ASK, as `orq::RedisStore`
//! does through the async cluster client. Nothing here checks that a call's keys share one slot:
//! when they do not, Redis answers CROSSSLOT and the caller sees that reply. Emptying the store,
//! reading its clock and dumping its keys go to every primary directly, over a [`RealRedis`]
//! connection each.

use super::{reply, RealRedis};
use orq::testing::RedisCluster;
use orq::Resp;
use orq_sim::Dump;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::ConnectionLike;

/// A cluster of `primaries` primaries with `replicas` replicas each, and connections to it.
pub struct RealCluster {
    /// Routes by slot (see the module comment).
    conn: ClusterConnection,
    /// A direct connection to each primary as the cluster stood at start, with its port.
    primaries: Vec<(u16, RealRedis)>,
    /// Declared last so it is dropped last: stops every node.
    _cluster: RedisCluster,
}

impl RealCluster {
    /// Start the cluster (see `RedisCluster::start`) and connect to it.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        let cluster = RedisCluster::start(primaries, replicas);
        let direct: Vec<(u16, RealRedis)> = cluster
            .primaries()
            .iter()
            .map(|n| (n.port, RealRedis::connect(&node_url(n.port))))
            .collect();
        assert_eq!(direct.len(), primaries, "the cluster's primaries");
        let urls: Vec<String> = direct.iter().map(|(port, _)| node_url(*port)).collect();
        let conn = ClusterClient::new(urls)
            .and_then(|c| c.get_connection())
            .expect("connect the cluster client");
        RealCluster {
            conn,
            primaries: direct,
            _cluster: cluster,
        }
    }

    /// Run one command on the primary of its key's slot; the reply (errors included).
    pub fn command(&mut self, args: &[&[u8]]) -> Resp {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
        for a in &args[1..] {
            cmd.arg(*a);
        }
        reply(self.conn.req_command(&cmd))
    }

    /// EVALSHA of a registered script on the primary of KEYS[1]'s slot, with EVAL on NOSCRIPT
    /// (each primary has its own script cache).
    pub fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let eval = |name: &str, body: &str| {
            let mut cmd = redis::cmd(name);
            cmd.arg(body).arg(keys.len()).arg(keys);
            for a in args {
                cmd.arg(a.as_slice());
            }
            cmd
        };
        match reply(self.conn.req_command(&eval("EVALSHA", &script.sha1))) {
            Resp::Error(e) if e.starts_with("NOSCRIPT") => {
                reply(self.conn.req_command(&eval("EVAL", &script.source)))
            }
            other => other,
        }
    }

    /// FLUSHALL on every primary (each replica follows its primary).
    pub fn flushall(&mut self) {
        for (_, node) in &mut self.primaries {
            node.flushall();
        }
    }

    /// The first primary's clock (TIME) in milliseconds; the nodes share this machine's clock.
    pub fn time_ms(&mut self) -> u64 {
        self.primaries[0].1.time_ms()
    }

    /// Every key of every primary, in byte order. Panics when two primaries hold the same key.
    pub fn dump(&mut self) -> Dump {
        let mut out = Dump::new();
        for (port, node) in &mut self.primaries {
            for (key, value) in node.dump() {
                let key_text = String::from_utf8_lossy(&key).into_owned();
                let before = out.insert(key, value);
                assert!(
                    before.is_none(),
                    "key {key_text:?} is on two primaries (the second on port {port})"
                );
            }
        }
        out
    }
}

/// `redis://127.0.0.1:<port>/`.
fn node_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

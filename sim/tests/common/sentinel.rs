//! The primary of a Sentinel deployment, found as a client finds it: by asking a sentinel.

use super::RealRedis;
use orq::testing::{RedisSentinel, MASTER_NAME};
use orq::Resp;

/// Connect to the primary that the first answering sentinel of `deployment` names for
/// [`MASTER_NAME`] (`SENTINEL GET-MASTER-ADDR-BY-NAME`), and check that the server there says
/// it is a primary (ROLE). The fixture's own record of the primary is not read.
pub fn primary(deployment: &RedisSentinel) -> RealRedis {
    let (host, port) = deployment
        .sentinel_ports()
        .into_iter()
        .find_map(|sentinel_port| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{sentinel_port}/")).ok()?;
            let mut conn = client.get_connection().ok()?;
            let addr: Vec<String> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query(&mut conn)
                .ok()?;
            Some((addr.first()?.clone(), addr.get(1)?.parse::<u16>().ok()?))
        })
        .expect("no sentinel names the primary");
    let mut primary = RealRedis::connect(&format!("redis://{host}:{port}/"));
    let role = primary.command(&[b"ROLE"]);
    assert_eq!(
        role.as_array().and_then(|r| r.first()).cloned(),
        Some(Resp::Bulk(b"master".to_vec())),
        "the server the sentinels name ({host}:{port}) is not a primary: {role:?}"
    );
    primary
}

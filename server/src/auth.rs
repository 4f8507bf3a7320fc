//! API keys: who a request comes from (authentication) and what it may touch (authorisation).
//!
//! Keys are sent as `Authorization: Bearer <key>`. The server knows only their SHA-256 (hex),
//! read from a TOML file (`--api-keys FILE`) of `[[key]]` entries:
//!
//! ```toml
//! [[key]]
//! name = "ops"                 # [A-Za-z0-9._-]{1,64}, unique: shown in logs
//! sha256 = "<64 hex digits>"   # SHA-256 of the whole key, unique
//! role = "admin"               # everything
//!
//! [[key]]
//! name = "acme-web"
//! sha256 = "<64 hex digits>"
//! tenant = "acme"              # only tenant acme's tasks ...
//! queues = ["emails"]          # ... in these queues (optional: every queue)
//!
//! [[key]]
//! name = "resize-workers"
//! sha256 = "<64 hex digits>"
//! role = "worker"              # only lease tasks and report on them (`/api/v1/leases`) ...
//! queues = ["images"]          # ... in these queues (optional: every queue)
//! ```
//!
//! The file is checked strictly when the server starts ([`ApiKeys::parse`]): unknown fields, bad
//! hex, `role` together with `tenant`, duplicate names or hashes are errors that name the entry.
//! Without a file authentication is off ([`Auth::Off`]): every request acts as an admin, and the
//! command line then listens on loopback addresses only.
//!
//! A request's rights are its [`Caller`], put into the request by the [`authenticate`]
//! middleware and taken by handlers as an extractor; the checks (`require_admin`, `sees`,
//! `tenant_for`, ...) live on it, so each handler states its rule in one line.

use crate::error::ApiError;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use orq::keys::is_valid_name;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;

mod cursor;

/// Prefix of the keys `orq key new` makes (any bearer token works, the prefix only helps people
/// and secret scanners recognise an orq key).
pub const KEY_PREFIX: &str = "orq_";
/// Random bytes in a key made by `orq key new` (from the operating system's generator).
pub const KEY_RANDOM_BYTES: usize = 32;
/// Longest bearer token considered (bytes); longer ones are unknown keys.
pub const TOKEN_MAX_BYTES: usize = 512;
/// Largest API keys file read (bytes).
pub const KEYS_FILE_MAX_BYTES: u64 = 4 << 20;
/// Most entries in an API keys file.
pub const KEYS_MAX: usize = 10_000;

/// The `WWW-Authenticate` challenge of a request without a key.
pub const CHALLENGE_MISSING: &str = "Bearer realm=\"orq\"";
/// The `WWW-Authenticate` challenge of a request with an unknown or malformed key (RFC 6750).
pub const CHALLENGE_INVALID: &str = "Bearer realm=\"orq\", error=\"invalid_token\"";

/// What a key may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Everything (and every request when authentication is off).
    Admin,
    /// Submit, read, cancel and replay the tasks of one tenant, in the listed queues only
    /// (`None`: in every queue).
    Tenant {
        /// The tenant.
        tenant: String,
        /// The queues it may use; `None` = every queue.
        queues: Option<BTreeSet<String>>,
    },
    /// Lease tasks and report on them (heartbeat, complete, fail, release) through the worker
    /// protocol (`/api/v1/leases`), in the listed queues only (`None`: in every queue) and of the
    /// listed tenants only (`None`: of every tenant); no other route.
    Worker {
        /// The queues it may lease from; `None` = every queue.
        queues: Option<BTreeSet<String>>,
        /// The tenants whose tasks it may lease (1..=[`orq::ops::LEASE_TENANTS_MAX`]); `None` =
        /// every tenant. Its reports need the lease's token, which only its leases gave it.
        tenants: Option<BTreeSet<String>>,
    },
}

/// The caller of a request: the key's name (`None` when authentication is off) and its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's `name` from the keys file.
    pub name: Option<String>,
    /// What it may do.
    pub scope: Scope,
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::forbidden(message)
}

impl Caller {
    /// The caller of every request when authentication is off.
    pub fn anonymous_admin() -> Self {
        Caller {
            name: None,
            scope: Scope::Admin,
        }
    }

    /// True for an admin key (or with authentication off).
    pub fn is_admin(&self) -> bool {
        matches!(self.scope, Scope::Admin)
    }

    /// True for a worker key.
    pub fn is_worker(&self) -> bool {
        matches!(self.scope, Scope::Worker { .. })
    }

    /// The tenant a tenant key is bound to (`None` for an admin or a worker key).
    pub fn tenant(&self) -> Option<&str> {
        match &self.scope {
            Scope::Admin | Scope::Worker { .. } => None,
            Scope::Tenant { tenant, .. } => Some(tenant),
        }
    }

    /// What the key is limited to, for the messages of refusals.
    fn limits(&self) -> String {
        match &self.scope {
            Scope::Admin => "this key may do everything".into(),
            Scope::Tenant { tenant, .. } => format!("this key is limited to tenant {tenant}"),
            Scope::Worker { .. } => "this is a worker key".into(),
        }
    }

    /// 403 unless the caller is an admin; `what` says what was refused.
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(forbidden(format!(
                "{what} needs an admin key; {}",
                self.limits()
            )))
        }
    }

    /// 403 unless the caller may lease and report (an admin or a worker key).
    pub fn require_worker(&self) -> Result<(), ApiError> {
        match self.scope {
            Scope::Admin | Scope::Worker { .. } => Ok(()),
            Scope::Tenant { .. } => Err(forbidden(format!(
                "leasing and reporting need a worker key (role = \"worker\") or an admin key; {}",
                self.limits()
            ))),
        }
    }

    /// True when the caller may use `queue`.
    pub fn may_use_queue(&self, queue: &str) -> bool {
        match &self.scope {
            Scope::Admin => true,
            Scope::Tenant { queues: None, .. } | Scope::Worker { queues: None, .. } => true,
            Scope::Tenant {
                queues: Some(qs), ..
            }
            | Scope::Worker {
                queues: Some(qs), ..
            } => qs.contains(queue),
        }
    }

    /// 403 unless the caller may use `queue`.
    pub fn check_queue(&self, queue: &str) -> Result<(), ApiError> {
        if self.may_use_queue(queue) {
            Ok(())
        } else {
            Err(forbidden(format!(
                "queue: this key may not use queue {queue}"
            )))
        }
    }

    /// The tenants a lease of the caller's serves, from those the request names (`asked`, the
    /// lease body's `tenants`; `None` or empty: every tenant the key may lease): empty for every
    /// tenant. A worker key limited to some tenants leases only theirs, and naming another is a
    /// 403.
    pub fn lease_tenants(&self, asked: &[String]) -> Result<Vec<String>, ApiError> {
        let allowed = match &self.scope {
            Scope::Worker {
                tenants: Some(ts), ..
            } => ts,
            _ => return Ok(asked.to_vec()),
        };
        if asked.is_empty() {
            return Ok(allowed.iter().cloned().collect());
        }
        match asked.iter().find(|t| !allowed.contains(*t)) {
            Some(t) => Err(forbidden(format!(
                "tenants: this key may lease the tasks of {} only, not of {t}",
                allowed.iter().cloned().collect::<Vec<_>>().join(", ")
            ))),
            None => Ok(asked.to_vec()),
        }
    }

    /// The tenants whose tasks a worker key limited to some tenants may lease and report on
    /// (`None`: every tenant, or not a worker key). Reports are checked against them as leases
    /// are: a report on another tenant's task answers as if the task did not exist.
    pub fn report_tenants(&self) -> Option<&BTreeSet<String>> {
        match &self.scope {
            Scope::Worker {
                tenants: Some(ts), ..
            } => Some(ts),
            _ => None,
        }
    }

    /// True when the caller may see the task of `tenant` in `queue`. A tenant key sees only its
    /// own tenant's tasks in its queues; by-id routes answer 404 for the others, exactly as for a
    /// task that does not exist.
    pub fn sees(&self, queue: &str, tenant: &str) -> bool {
        match &self.scope {
            Scope::Admin => true,
            Scope::Tenant { tenant: own, .. } => own == tenant && self.may_use_queue(queue),
            Scope::Worker { .. } => false,
        }
    }

    /// The tenant a request acts for, from the tenant it names (`field` is the field's name for
    /// messages): an admin's is what it names; a tenant key's is its own tenant, and naming
    /// another one is a 403.
    pub fn tenant_for(
        &self,
        field: &str,
        given: Option<String>,
    ) -> Result<Option<String>, ApiError> {
        match (&self.scope, given) {
            (Scope::Admin, given) => Ok(given),
            (Scope::Tenant { tenant, .. }, None) => Ok(Some(tenant.clone())),
            (Scope::Tenant { tenant, .. }, Some(g)) if *tenant == g => Ok(Some(g)),
            (Scope::Tenant { tenant, .. }, Some(g)) => Err(forbidden(format!(
                "{field}: this key is limited to tenant {tenant} and cannot act for {g}"
            ))),
            (Scope::Worker { .. }, _) => Err(forbidden(format!(
                "{field}: a worker key acts for no tenant; it only leases and reports"
            ))),
        }
    }
}

/// Handlers take the caller as an extractor. It is put in place by [`authenticate`]; a route
/// without that middleware has no caller and answers 401 (it fails closed).
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("no API key was checked", CHALLENGE_MISSING))
    }
}

/// One entry of the keys file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyToml {
    name: String,
    sha256: String,
    role: Option<String>,
    tenant: Option<String>,
    queues: Option<Vec<String>>,
    tenants: Option<Vec<String>>,
}

/// The keys file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysToml {
    #[serde(default)]
    key: Vec<KeyToml>,
}

/// One known key: the SHA-256 of the key and what it may do.
#[derive(Debug, Clone)]
struct KeyEntry {
    sha256: [u8; 32],
    caller: Caller,
}

/// The known API keys (hashes only), checked at startup.
#[derive(Debug, Clone)]
pub struct ApiKeys {
    entries: Vec<KeyEntry>,
    /// The secret that seals listing cursors for tenant keys ([`ApiKeys::seal_cursor`]):
    /// derived from every key's hash, so every API process given the same file has the same one.
    cursor_secret: [u8; 32],
}

/// SHA-256 of `key`, as the keys file writes it: 64 lowercase hex digits.
pub fn sha256_hex(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

impl ApiKeys {
    /// Read and check the keys file at `path`. Errors name the file and the entry.
    pub fn load(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("--api-keys {shown}: {e}"))?;
        if meta.len() > KEYS_FILE_MAX_BYTES {
            return Err(format!(
                "--api-keys {shown}: larger than {KEYS_FILE_MAX_BYTES} bytes"
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("--api-keys {shown}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("--api-keys {shown}: {e}"))
    }

    /// Parse and check the text of a keys file (see the module documentation): at least one
    /// entry, at most [`KEYS_MAX`]; names valid and unique; `sha256` 64 hex digits, unique;
    /// exactly one of `role = "admin"`, `role = "worker"` and `tenant`; `queues` only with
    /// `tenant` or `role = "worker"`, non-empty, valid and distinct names.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: KeysToml = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.key.is_empty() {
            return Err("no [[key]] entry: add one with `orq key new`".into());
        }
        if file.key.len() > KEYS_MAX {
            return Err(format!("more than {KEYS_MAX} keys"));
        }
        let mut names = HashSet::new();
        let mut hashes = HashSet::new();
        let mut entries = Vec::with_capacity(file.key.len());
        for (i, k) in file.key.into_iter().enumerate() {
            let at = format!("key #{} ({:?})", i + 1, k.name);
            if !is_valid_name(&k.name) {
                return Err(format!("{at}: name must match [A-Za-z0-9._-]{{1,64}}"));
            }
            if !names.insert(k.name.clone()) {
                return Err(format!("{at}: the name {} is used twice", k.name));
            }
            let sha256 = parse_hex32(&k.sha256).ok_or_else(|| {
                format!("{at}: sha256 must be 64 hex digits (the SHA-256 of the key)")
            })?;
            if !hashes.insert(sha256) {
                return Err(format!("{at}: the same sha256 as an earlier key"));
            }
            let queues = match k.queues {
                None => None,
                Some(qs) => Some(parse_names(&at, "queues", "queue", qs)?),
            };
            let tenants = match k.tenants {
                None => None,
                Some(_) if k.role.as_deref() != Some("worker") => {
                    return Err(format!("{at}: tenants applies to worker keys only"))
                }
                Some(ts) if ts.len() > orq::ops::LEASE_TENANTS_MAX => {
                    return Err(format!(
                        "{at}: tenants names more than {} tenants",
                        orq::ops::LEASE_TENANTS_MAX
                    ))
                }
                Some(ts) => Some(parse_names(&at, "tenants", "tenant", ts)?),
            };
            let scope = match (k.role.as_deref(), k.tenant) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "{at}: give either a role (\"admin\", \"worker\") or tenant, not both"
                    ))
                }
                (None, None) => {
                    return Err(format!(
                        "{at}: give either role = \"admin\", role = \"worker\" or tenant"
                    ))
                }
                (Some("admin"), None) => {
                    if queues.is_some() {
                        return Err(format!(
                            "{at}: queues applies to tenant and worker keys only (an admin key has every queue)"
                        ));
                    }
                    Scope::Admin
                }
                (Some("worker"), None) => Scope::Worker { queues, tenants },
                (Some(other), None) => {
                    return Err(format!(
                        "{at}: role {other:?} is unknown (the roles are \"admin\" and \"worker\"; a tenant key has tenant = \"...\")"
                    ))
                }
                (None, Some(tenant)) => {
                    if !is_valid_name(&tenant) {
                        return Err(format!("{at}: tenant must match [A-Za-z0-9._-]{{1,64}}"));
                    }
                    Scope::Tenant { tenant, queues }
                }
            };
            entries.push(KeyEntry {
                sha256,
                caller: Caller {
                    name: Some(k.name),
                    scope,
                },
            });
        }
        let mut hashes: Vec<[u8; 32]> = entries.iter().map(|e| e.sha256).collect();
        hashes.sort_unstable();
        let mut h = Sha256::new();
        h.update(b"orq-cursor-secret-v1");
        for x in &hashes {
            h.update(x);
        }
        Ok(ApiKeys {
            entries,
            cursor_secret: h.finalize().into(),
        })
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no key (never for a parsed file).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The caller whose key is `token`, if any. The token's hash is compared with every entry in
    /// constant time (no early exit on the first differing byte nor on the first match).
    pub fn find(&self, token: &str) -> Option<&Caller> {
        if token.is_empty() || token.len() > TOKEN_MAX_BYTES {
            return None;
        }
        let h: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.sha256.ct_eq(&h)) {
                found = Some(&e.caller);
            }
        }
        found
    }
}

/// The `queues` of a tenant or worker key entry (`at` names the entry in messages): non-empty,
/// valid and distinct names.
/// The names of a key's `field` (`queues`, `tenants`; `one` names one of them in messages):
/// not empty, each valid, none twice.
fn parse_names(
    at: &str,
    field: &str,
    one: &str,
    names: Vec<String>,
) -> Result<BTreeSet<String>, String> {
    if names.is_empty() {
        return Err(format!(
            "{at}: {field} is empty (leave it out to allow every {one})"
        ));
    }
    let mut set = BTreeSet::new();
    for q in names {
        if !is_valid_name(&q) {
            return Err(format!(
                "{at}: {one} {q:?} must match [A-Za-z0-9._-]{{1,64}}"
            ));
        }
        if !set.insert(q.clone()) {
            return Err(format!("{at}: {one} {q} is listed twice"));
        }
    }
    Ok(set)
}

/// Whether and how requests are authenticated.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// No keys configured: every request is an admin ([`Caller::anonymous_admin`]).
    #[default]
    Off,
    /// Every protected route needs one of these keys.
    Keys(Arc<ApiKeys>),
}

impl Auth {
    /// The caller of a request with `headers`: 401 when keys are configured and the request has
    /// none, a malformed `Authorization` header, or an unknown key.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let keys = match self {
            Auth::Off => return Ok(Caller::anonymous_admin()),
            Auth::Keys(k) => k,
        };
        let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
        let Some(value) = values.next() else {
            return Err(ApiError::unauthorized(
                "missing API key: send Authorization: Bearer <key>",
                CHALLENGE_MISSING,
            ));
        };
        let unknown = || {
            ApiError::unauthorized(
                "unknown or malformed API key (send Authorization: Bearer <key>)",
                CHALLENGE_INVALID,
            )
        };
        if values.next().is_some() {
            return Err(unknown());
        }
        let value = value.to_str().map_err(|_| unknown())?;
        let (scheme, token) = value.split_once(' ').ok_or_else(unknown)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(unknown());
        }
        let token = token.trim_matches(' ');
        keys.find(token).cloned().ok_or_else(unknown)
    }
}

impl Auth {
    /// The cursor `caller` receives for the engine's `cursor`: sealed for a tenant key (see
    /// [`ApiKeys::seal_cursor`]), as it is for an admin.
    pub fn cursor_out(&self, caller: &Caller, cursor: String) -> String {
        match (self, caller.tenant()) {
            (Auth::Keys(keys), Some(tenant)) => keys.seal_cursor(tenant, &cursor),
            _ => cursor,
        }
    }

    /// The engine cursor of a cursor `caller` sent: opened for a tenant key, as it is for an
    /// admin. 400 when a tenant key's cursor does not open.
    pub fn cursor_in(&self, caller: &Caller, cursor: String) -> Result<String, ApiError> {
        match (self, caller.tenant()) {
            (Auth::Keys(keys), Some(tenant)) if !cursor.is_empty() => keys
                .open_cursor(tenant, &cursor)
                .ok_or_else(|| ApiError::bad_request("cursor: malformed")),
            _ => Ok(cursor),
        }
    }
}

/// Middleware of the protected routes but the worker protocol's: authenticate the request and
/// put its [`Caller`] into its extensions, or answer 401 with `WWW-Authenticate: Bearer`; a
/// worker key is a 403 here (it may only lease and report).
pub async fn authenticate(State(auth): State<Auth>, mut req: Request, next: Next) -> Response {
    match auth.caller(req.headers()) {
        Ok(caller) if caller.is_worker() => forbidden(
            "a worker key may only lease and report (/api/v1/leases); use an admin or tenant key",
        )
        .into_response(),
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Middleware of the worker protocol's routes (`/api/v1/leases`): as [`authenticate`], for
/// admin and worker keys; a tenant key is a 403 (a tenant key leases no task, its own tenant's
/// neither: workers hold worker keys).
pub async fn authenticate_worker(
    State(auth): State<Auth>,
    mut req: Request,
    next: Next,
) -> Response {
    match auth.caller(req.headers()) {
        Ok(caller) => match caller.require_worker() {
            Ok(()) => {
                req.extensions_mut().insert(caller);
                next.run(req).await
            }
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
    }
}

/// A fresh key from the operating system's random generator: [`KEY_PREFIX`] and
/// [`KEY_RANDOM_BYTES`] bytes in lowercase hex.
pub fn new_key() -> Result<String, String> {
    let mut bytes = [0u8; KEY_RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness from the OS: {e}"))?;
    Ok(format!("{KEY_PREFIX}{}", hex(&bytes)))
}

/// The `[[key]]` entry of `key` for the keys file: `scope` as given, `name` as given.
pub fn toml_entry(name: &str, key: &str, scope: &Scope) -> String {
    let mut s = format!(
        "[[key]]\nname = \"{name}\"\nsha256 = \"{}\"\n",
        sha256_hex(key)
    );
    match scope {
        Scope::Admin => s.push_str("role = \"admin\"\n"),
        Scope::Tenant { tenant, queues } => {
            s.push_str(&format!("tenant = \"{tenant}\"\n"));
            push_queues(&mut s, queues.as_ref());
        }
        Scope::Worker { queues, tenants } => {
            s.push_str("role = \"worker\"\n");
            push_queues(&mut s, queues.as_ref());
            push_names(&mut s, "tenants", tenants.as_ref());
        }
    }
    s
}

/// Append the `queues = [..]` line of `queues` (none for every queue).
fn push_queues(s: &mut String, queues: Option<&BTreeSet<String>>) {
    push_names(s, "queues", queues)
}

/// Append the `field = [..]` line of `names` (none when `None`).
fn push_names(s: &mut String, field: &str, names: Option<&BTreeSet<String>>) {
    if let Some(qs) = names {
        let list: Vec<String> = qs.iter().map(|q| format!("\"{q}\"")).collect();
        s.push_str(&format!("{field} = [{}]\n", list.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "orq_aaaa";

    fn file(entries: &str) -> Result<ApiKeys, String> {
        ApiKeys::parse(entries)
    }

    // Goal: a well-formed file parses, and each key is found by its own token only.
    #[test]
    fn keys_are_found_by_their_token_only() {
        let text = format!(
            "{}\n{}",
            toml_entry("ops", A, &Scope::Admin),
            toml_entry(
                "acme",
                "orq_bbbb",
                &Scope::Tenant {
                    tenant: "acme".into(),
                    queues: Some(["emails".to_string()].into()),
                }
            )
        );
        let text = format!(
            "{text}{}",
            toml_entry(
                "resizers",
                "orq_cccc",
                &Scope::Worker {
                    queues: Some(["images".to_string()].into()),
                    tenants: None,
                }
            )
        );
        let keys = file(&text).unwrap();
        assert_eq!(keys.len(), 3);
        let w = keys.find("orq_cccc").unwrap();
        assert!(w.is_worker() && w.require_worker().is_ok() && w.require_admin("x").is_err());
        assert!(w.may_use_queue("images") && !w.may_use_queue("emails"));
        assert!(!w.sees("images", "default") && w.tenant_for("tenant", None).is_err());
        assert_eq!(keys.find(A).unwrap().scope, Scope::Admin);
        let t = keys.find("orq_bbbb").unwrap();
        assert_eq!(t.tenant(), Some("acme"));
        assert!(t.require_worker().is_err(), "a tenant key leases nothing");
        assert!(t.may_use_queue("emails") && !t.may_use_queue("default"));
        for bad in ["", "orq_aaa", "orq_aaaaa", "ORQ_AAAA", &"x".repeat(600)] {
            assert!(keys.find(bad).is_none(), "{bad:?}");
        }
    }

    // Goal: every malformed file is refused with a message naming the problem.
    #[test]
    fn malformed_key_files_are_refused_with_a_reason() {
        let h = sha256_hex(A);
        let h2 = sha256_hex("orq_other");
        let cases = [
            ("", "no [[key]]"),
            ("[[key]]\nname = \"a\"\n", "sha256"),
            (&format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\n"), "either"),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"admin\"\ntenant=\"t\"\n"),
                "not both",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"root\"\n"),
                "unknown",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"admin\"\ncolour=1\n"),
                "colour",
            ),
            (
                "[[key]]\nname=\"a\"\nsha256=\"xyz\"\nrole=\"admin\"\n",
                "64 hex",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{}\"\nrole=\"admin\"\n",
                    &h[..62]
                ),
                "64 hex",
            ),
            (
                &format!("[[key]]\nname=\"a b\"\nsha256=\"{h}\"\nrole=\"admin\"\n"),
                "name",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\ntenant=\"t\"\ntenants=[\"t\"]\n"),
                "tenants applies to worker keys only",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"worker\"\ntenants=[]\n"),
                "tenants is empty",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"worker\"\ntenants=[{}]\n",
                    (0..17)
                        .map(|i| format!("\"t{i}\""))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                "more than 16",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"worker\"\ntenants=[\"a b\"]\n"
                ),
                "tenant \"a b\"",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"admin\"\n\
                     [[key]]\nname=\"a\"\nsha256=\"{h2}\"\nrole=\"admin\"\n"
                ),
                "used twice",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"admin\"\n\
                     [[key]]\nname=\"b\"\nsha256=\"{}\"\nrole=\"admin\"\n",
                    h.to_uppercase()
                ),
                "same sha256",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\ntenant=\"{{t}}\"\n"),
                "tenant",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\ntenant=\"t\"\nqueues=[]\n"),
                "empty",
            ),
            (
                &format!(
                    "[[key]]\nname=\"a\"\nsha256=\"{h}\"\ntenant=\"t\"\nqueues=[\"q\",\"q\"]\n"
                ),
                "twice",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\ntenant=\"t\"\nqueues=[\"a:b\"]\n"),
                "queue",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"admin\"\nqueues=[\"q\"]\n"),
                "tenant and worker keys only",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"worker\"\nqueues=[]\n"),
                "empty",
            ),
            (
                &format!("[[key]]\nname=\"a\"\nsha256=\"{h}\"\nrole=\"worker\"\ntenant=\"t\"\n"),
                "not both",
            ),
            ("[[key]]\nname = 1\n", "name"),
            ("not toml at all", ""),
        ];
        for (text, mentions) in cases {
            let e = file(text).expect_err(text);
            assert!(e.contains(mentions), "{text:?}: {e}");
        }
    }

    // Goal: the rights of each scope: an admin may do everything; a tenant key acts for its own
    // tenant only, in its queues only.
    #[test]
    fn tenant_keys_act_for_their_own_tenant_in_their_queues() {
        let admin = Caller::anonymous_admin();
        assert!(admin.require_admin("x").is_ok());
        assert_eq!(admin.tenant_for("tenant", None).unwrap(), None);
        assert_eq!(
            admin.tenant_for("tenant", Some("b".into())).unwrap(),
            Some("b".into())
        );
        let t = Caller {
            name: Some("k".into()),
            scope: Scope::Tenant {
                tenant: "a".into(),
                queues: Some(["q1".to_string()].into()),
            },
        };
        assert_eq!(
            t.require_admin("pausing").unwrap_err().status().as_u16(),
            403
        );
        assert_eq!(t.tenant_for("tenant", None).unwrap(), Some("a".into()));
        assert_eq!(
            t.tenant_for("tenant", Some("a".into())).unwrap(),
            Some("a".into())
        );
        assert_eq!(
            t.tenant_for("tenant", Some("b".into()))
                .unwrap_err()
                .status()
                .as_u16(),
            403
        );
        assert!(t.sees("q1", "a"));
        assert!(!t.sees("q2", "a"), "another queue");
        assert!(!t.sees("q1", "b"), "another tenant");
        assert!(t.check_queue("q2").is_err());
    }

    // Goal: the Authorization header is parsed strictly: Bearer (any case), one key; anything
    // else is 401 with the invalid_token challenge, and no header is 401 with the plain one.
    #[test]
    fn authorization_header_forms() {
        let keys = Auth::Keys(Arc::new(
            file(&toml_entry("ops", A, &Scope::Admin)).unwrap(),
        ));
        let with = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("authorization", v.parse().unwrap());
            }
            keys.caller(&h)
        };
        assert!(with(&["Bearer orq_aaaa"]).is_ok());
        assert!(with(&["bearer orq_aaaa"]).is_ok());
        let e = with(&[]).unwrap_err();
        assert_eq!(
            (e.status().as_u16(), e.www_authenticate),
            (401, Some(CHALLENGE_MISSING))
        );
        for bad in [
            &["Basic orq_aaaa"][..],
            &["Bearer"],
            &["Bearerorq_aaaa"],
            &["Bearer orq_bbbb"],
            &["Bearer orq_aaaa", "Bearer orq_aaaa"],
        ] {
            let e = with(bad).unwrap_err();
            assert_eq!(
                (e.status().as_u16(), e.www_authenticate),
                (401, Some(CHALLENGE_INVALID)),
                "{bad:?}"
            );
        }
        assert!(Auth::Off.caller(&HeaderMap::new()).unwrap().is_admin());
    }

    #[test]
    fn new_keys_are_fresh_prefixed_and_hash_to_their_entry() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX));
        assert_eq!(a.len(), KEY_PREFIX.len() + 2 * KEY_RANDOM_BYTES);
        let entry = toml_entry("n", &a, &Scope::Admin);
        let keys = file(&entry).unwrap();
        assert!(keys.find(&a).is_some());
        assert!(keys.find(&b).is_none());
    }
}

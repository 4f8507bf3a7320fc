//! [`Name`]: a queue, tenant or task type name as the API takes it, checked once where it enters
//! (a path, a query, a body field): `[A-Za-z0-9._-]{1,64}`, the rule of `orq::keys::is_valid_name`
//! (which also holds the limit, `orq::keys::NAME_MAX`). A `Name` can be used wherever a `&str`
//! is taken.

use crate::error::ApiError;
use crate::openapi::NAME_PATTERN;
use orq::keys::is_valid_name;
use serde::Deserialize;
use std::fmt;
use std::ops::Deref;

/// A valid queue, tenant or task type name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct Name(String);

/// The error of a string that is not a valid [`Name`]; it says the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName;

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The rule as the OpenAPI document writes it, without its anchors.
        let rule = NAME_PATTERN.trim_start_matches('^').trim_end_matches('$');
        write!(f, "must match {rule}")
    }
}

impl std::error::Error for InvalidName {}

impl TryFrom<String> for Name {
    type Error = InvalidName;

    fn try_from(s: String) -> Result<Self, InvalidName> {
        if is_valid_name(&s) {
            Ok(Name(s))
        } else {
            Err(InvalidName)
        }
    }
}

/// In the OpenAPI document a name is a string of [`NAME_PATTERN`] (schema `Name`), so a list of
/// names documents its items' rule.
impl utoipa::PartialSchema for Name {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(NAME_PATTERN))
            .description(Some("A queue, tenant, type or worker name."))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for Name {
    fn name() -> std::borrow::Cow<'static, str> {
        "Name".into()
    }
}

impl Name {
    /// `v` as a name, or a 400 naming `field` (`queue: must match ...`).
    pub fn parse(field: &str, v: impl Into<String>) -> Result<Name, ApiError> {
        Name::try_from(v.into()).map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_engine_rule() {
        let long = "a".repeat(orq::keys::NAME_MAX);
        for ok in ["q", "a.b_c-D9", long.as_str()] {
            assert_eq!(Name::try_from(ok.to_string()).unwrap().as_str(), ok);
        }
        let too_long = "a".repeat(orq::keys::NAME_MAX + 1);
        for bad in ["", "a b", "a{b}", "a:b", "é", too_long.as_str()] {
            assert_eq!(Name::try_from(bad.to_string()), Err(InvalidName), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_name_is_a_400_naming_its_field() {
        let e = Name::parse("tenant", "a b").unwrap_err();
        assert_eq!(e.status().as_u16(), 400);
        assert_eq!(e.message, "tenant: must match [A-Za-z0-9._-]{1,64}");
        let e = serde_json::from_str::<Name>("\"a b\"").unwrap_err();
        assert!(e.to_string().starts_with("must match"), "{e}");
    }
}

//! [`NrtQuantity`]: a resource amount as it travels in an NRT object.
//!
//! The CRD declares amounts int-or-string, so readers get `52` from some writers and
//! `"52"` or `"2Gi"` from others. Strings are kept exactly as received and integers
//! become their decimal string, so re-writing an object never changes an amount's
//! meaning; the text is parsed to an integer only when asked.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::quantity::{self, QuantityError};

/// A Kubernetes quantity from an NRT object: read from a JSON integer or string,
/// always written as a string.
///
/// Equality compares the text: `"2Gi"` and `"2147483648"` are different values that
/// [`NrtQuantity::value`] maps to the same number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NrtQuantity(pub String);

impl NrtQuantity {
    /// Wraps quantity text as is; it is validated only when parsed.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The canonical quantity for a whole number of units (`52` → `"52"`).
    pub fn from_value(value: i64) -> Self {
        Self(quantity::format_value(value))
    }

    /// The quantity text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The amount in whole units, rounded away from zero (bytes, CPUs, devices).
    pub fn value(&self) -> Result<i64, QuantityError> {
        quantity::parse_value(&self.0)
    }

    /// The amount in milli-units, rounded away from zero (CPU millicores).
    pub fn milli_value(&self) -> Result<i64, QuantityError> {
        quantity::parse_milli(&self.0)
    }
}

impl fmt::Display for NrtQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<i64> for NrtQuantity {
    fn from(value: i64) -> Self {
        Self::from_value(value)
    }
}

impl From<&str> for NrtQuantity {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for NrtQuantity {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl Serialize for NrtQuantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NrtQuantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = NrtQuantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer or a quantity string")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<NrtQuantity, E> {
        Ok(NrtQuantity(value.to_string()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<NrtQuantity, E> {
        Ok(NrtQuantity(value.to_string()))
    }

    /// The API server never sends fractional numbers here, but hand-written YAML
    /// fixtures (`0.5`, `1e3` unquoted) are read as floats by YAML parsers.
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<NrtQuantity, E> {
        if value.is_finite() {
            Ok(NrtQuantity(value.to_string()))
        } else {
            Err(E::invalid_value(de::Unexpected::Float(value), &self))
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<NrtQuantity, E> {
        Ok(NrtQuantity(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<NrtQuantity, E> {
        Ok(NrtQuantity(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_integers_and_strings_writes_strings() {
        let read: Vec<NrtQuantity> =
            serde_json::from_str(r#"[52, "52", "2Gi", -1, 18446744073709551615]"#).unwrap();
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            r#"["52","52","2Gi","-1","18446744073709551615"]"#
        );
        assert_eq!(read[0].value(), Ok(52));
        assert_eq!(read[2].value(), Ok(2 << 30));
        assert!(read[4].value().is_err());
    }

    #[test]
    fn reads_unquoted_yaml_numbers() {
        let read: Vec<NrtQuantity> = serde_norway::from_str("[0.5, 1e3, 2Gi, 7]").unwrap();
        assert_eq!(read[0].milli_value(), Ok(500));
        assert_eq!(read[1].value(), Ok(1000));
        assert_eq!(read[2].value(), Ok(2 << 30));
        assert_eq!(read[3], NrtQuantity::from(7));
    }

    #[test]
    fn rejects_other_json_types() {
        for bad in ["null", "true", "[]", "{}"] {
            assert!(serde_json::from_str::<NrtQuantity>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_errors_name_the_text() {
        let err = NrtQuantity::new("lots").value().unwrap_err();
        assert!(err.to_string().contains("\"lots\""), "{err}");
    }
}

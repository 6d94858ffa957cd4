//! `quantity("1Gi")` and its methods, as the Kubernetes CEL quantity library names
//! them: a device's `capacity` values are quantities, and selectors compare them.
//!
//! A quantity is held as milli-units when that fits in an `i64` (exact up to about
//! 9.2·10¹⁵ units) and always as whole units rounded away from zero (up to about
//! 9.2·10¹⁸ units), so comparisons are exact to the milli-unit for every realistic
//! capacity and exact to the unit beyond. Larger amounts do not parse. `add`, `sub`
//! and `isQuantity`-free arithmetic are not offered (see the module doc of
//! [`super`]).

use std::cmp::Ordering;

use ::cel::common::types::{CelBool, CelDouble, CelInt, STRING_TYPE, Type};
use ::cel::common::value::CowVal;
use ::cel::{DeclarationError, Env, ExecutionError};
use tas_api::quantity::{self, QuantityError};

use super::ordered;

/// The CEL type of quantities, named as in Kubernetes.
static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

/// A parsed resource quantity.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    /// Milli-units, when they fit in an `i64`.
    milli: Option<i64>,
    /// Whole units, rounded away from zero.
    value: i64,
}

impl Quantity {
    /// Parses a Kubernetes quantity string (`"80Gi"`, `"1500m"`, `"1e3"`).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let value = quantity::parse_value(text)?;
        Ok(Self {
            milli: quantity::parse_milli(text).ok(),
            value,
        })
    }

    /// The whole-unit amount, if the quantity is a whole number of units.
    pub fn as_integer(&self) -> Option<i64> {
        match self.milli {
            Some(milli) => (milli % 1000 == 0).then_some(milli / 1000),
            // Too large for milli-units: a fraction is below our precision.
            None => Some(self.value),
        }
    }

    fn approximate(&self) -> f64 {
        match self.milli {
            Some(milli) => milli as f64 / 1000.0,
            None => self.value as f64,
        }
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.milli, other.milli) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.value.cmp(&other.value),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

ordered::impl_val!(Quantity, QUANTITY_TYPE);

/// Registers `quantity`, `isQuantity` and the quantity methods on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("quantity", "dra_quantity", vec![STRING_TYPE], parse)?;
    env.add_overload(
        "isQuantity",
        "dra_is_quantity",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    ordered::register::<Quantity>(env, &QUANTITY_TYPE, "dra_quantity")?;
    let q = || QUANTITY_TYPE.to_owned();
    env.add_member_overload("asInteger", "dra_quantity_int", q(), vec![], as_integer)?;
    env.add_member_overload("isInteger", "dra_quantity_is_int", q(), vec![], is_integer)?;
    env.add_member_overload("sign", "dra_quantity_sign", q(), vec![], sign)?;
    env.add_member_overload(
        "asApproximateFloat",
        "dra_quantity_float",
        q(),
        vec![],
        float,
    )?;
    Ok(())
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let parsed = Quantity::parse(ordered::text("quantity", &args)?)
        .map_err(|e| ExecutionError::function_error("quantity", e))?;
    Ok(CowVal::owned(parsed))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let valid = Quantity::parse(ordered::text("isQuantity", &args)?).is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = ordered::operand::<Quantity>("asInteger", &args, 0)?;
    let integer = q.as_integer().ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })?;
    Ok(CowVal::owned(CelInt::from(integer)))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = ordered::operand::<Quantity>("isInteger", &args, 0)?;
    Ok(CowVal::owned(CelBool::from(q.as_integer().is_some())))
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = ordered::operand::<Quantity>("sign", &args, 0)?;
    Ok(CowVal::owned(CelInt::from(q.value.signum())))
}

fn float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = ordered::operand::<Quantity>("asApproximateFloat", &args, 0)?;
    Ok(CowVal::owned(CelDouble::from(q.approximate())))
}

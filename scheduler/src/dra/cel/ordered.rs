//! What [`super::quantity`] and [`super::semver`] share: the three comparison methods
//! of an ordered value type and reading a string argument.

use std::cmp::Ordering;

use ::cel::common::types::{CelBool, CelInt, CelString, Type};
use ::cel::common::value::{CowVal, StaticVal};
use ::cel::{DeclarationError, Env, ExecutionError};

/// Registers `compareTo`, `isGreaterThan` and `isLessThan` on values of `T`, whose CEL
/// type is `ty`; `id` keeps the overload ids unique per type.
pub fn register<T: StaticVal + Ord>(
    env: &mut Env,
    ty: &Type,
    id: &str,
) -> Result<(), DeclarationError> {
    let t = || ty.to_owned();
    env.add_member_overload(
        "compareTo",
        &format!("{id}_compare"),
        t(),
        vec![t()],
        compare_to::<T>,
    )?;
    env.add_member_overload(
        "isGreaterThan",
        &format!("{id}_gt"),
        t(),
        vec![t()],
        greater::<T>,
    )?;
    env.add_member_overload("isLessThan", &format!("{id}_lt"), t(), vec![t()], less::<T>)?;
    Ok(())
}

/// Argument `index` as a `T` (the environment only calls an overload with its types).
pub fn operand<'a, T: StaticVal>(
    function: &str,
    args: &'a [CowVal<'_, '_>],
    index: usize,
) -> Result<&'a T, ExecutionError> {
    args.get(index)
        .and_then(|arg| arg.downcast_ref::<T>())
        .ok_or_else(|| ExecutionError::function_error(function, "unexpected argument type"))
}

/// Argument 0 as a string.
pub fn text<'a>(function: &str, args: &'a [CowVal<'_, '_>]) -> Result<&'a str, ExecutionError> {
    args.first()
        .and_then(|arg| arg.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::function_error(function, "expects a string"))
}

fn ordering<T: StaticVal + Ord>(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<Ordering, ExecutionError> {
    Ok(operand::<T>(function, args, 0)?.cmp(operand::<T>(function, args, 1)?))
}

fn compare_to<'b, 'v, T: StaticVal + Ord>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering::<T>("compareTo", &args)?;
    Ok(CowVal::owned(CelInt::from(order as i64)))
}

fn greater<'b, 'v, T: StaticVal + Ord>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering::<T>("isGreaterThan", &args)?;
    Ok(CowVal::owned(CelBool::from(order == Ordering::Greater)))
}

fn less<'b, 'v, T: StaticVal + Ord>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering::<T>("isLessThan", &args)?;
    Ok(CowVal::owned(CelBool::from(order == Ordering::Less)))
}

/// Implements `Val` for an ordered `'static` value type whose CEL type is the static
/// `$cel`: equal when neither orders before the other, downcastable, no operators.
macro_rules! impl_val {
    ($ty:ty, $cel:ident) => {
        impl ::cel::common::value::Val for $ty {
            fn get_type(&self) -> &::cel::common::types::Type {
                &$cel
            }

            fn cel_type() -> &'static ::cel::common::types::Type {
                &$cel
            }

            fn equals(&self, other: &dyn ::cel::common::value::Val) -> bool {
                other
                    .downcast_ref::<$ty>()
                    .is_some_and(|other| self == other)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn ::cel::common::value::Val + 'v> {
                Box::new(self.clone())
            }

            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }

        impl ::cel::common::value::StaticVal for $ty {}
    };
}
pub(crate) use impl_val;

//! The compile-time checks a selector passes before it is used: only functions and
//! variables of the DRA environment, `device` fields that exist, a bounded nesting
//! depth and a bounded estimated cost.
//!
//! The crate only parses at compile time (no type checker), so these checks stand in
//! for the part of Kubernetes' type check that matters here: an expression using a
//! function TAS does not provide fails to compile instead of failing on every device.
//!
//! The cost estimate is an upper bound in abstract steps: each node costs one, string
//! work costs the length of its operands, and a comprehension costs its range's
//! largest size times its loop body (so nested macros multiply). Sizes come from
//! literals and from the API's limits on devices (at most 32 attributes and
//! capacities, values of at most 64 characters).

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use super::CompileError;
use super::device::DEVICE_FIELDS;

/// Deepest expression tree accepted (the interpreter recurses once per level).
pub const MAX_DEPTH: usize = 32;

/// Largest estimated cost accepted, the API's runtime cost limit for selectors.
pub const MAX_COST: u64 = 1_000_000;

/// Upper bound on the size of anything read from `device`: map entries (32) or the
/// characters of a name or value (64).
const DEVICE_VALUE_SIZE: u64 = 64;

/// Functions (and operators) an expression may call.
pub const FUNCTIONS: &[&str] = &[
    // Operators.
    operators::CONDITIONAL,
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::SUBSTRACT,
    operators::ADD,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::GREATER_EQUALS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::LESS,
    operators::NEGATE,
    operators::INDEX,
    operators::NOT_STRICTLY_FALSE,
    operators::IN,
    // The CEL standard library.
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "type",
    "dyn",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    // The strings extension, less what can grow a string beyond its operands.
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "trim",
    "split",
    "substring",
    // Kubernetes' quantity and semver libraries.
    "quantity",
    "isQuantity",
    "asInteger",
    "isInteger",
    "sign",
    "asApproximateFloat",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    "compareTo",
    "isGreaterThan",
    "isLessThan",
];

/// Type names an expression may mention (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

/// Upper bounds for one subexpression.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    /// Steps to evaluate it.
    cost: u64,
    /// Entries (list, map) or characters (string) of its value.
    size: u64,
    /// The largest size of one of its entries.
    elem: u64,
}

impl Estimate {
    fn scalar(cost: u64) -> Self {
        Self {
            cost,
            size: 1,
            elem: 1,
        }
    }
}

/// Refuses, before parsing, text nesting brackets deeper than [`MAX_DEPTH`] or
/// chaining more binary operators than the parser can take: both make its recursion
/// deep.
pub fn nesting(expression: &str) -> Result<(), CompileError> {
    let mut depth = 0usize;
    let mut operators = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expression.chars() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '&' | '|' | '!' | '?' => operators += 1,
            _ => {}
        }
        if depth > MAX_DEPTH || operators > MAX_OPERATORS {
            return Err(CompileError::TooDeep { max: MAX_DEPTH });
        }
    }
    Ok(())
}

/// Most operator characters an expression may hold (each binary operator is a level
/// of the parser's recursion).
const MAX_OPERATORS: usize = 512;

/// Checks a parsed selector; returns its estimated cost.
pub fn check(expr: &IdedExpr) -> Result<u64, CompileError> {
    let estimate = Walker::default().walk(expr, 0)?;
    if estimate.cost > MAX_COST {
        return Err(CompileError::TooCostly {
            estimate: estimate.cost,
            max: MAX_COST,
        });
    }
    Ok(estimate.cost)
}

/// The variables bound by enclosing comprehensions, innermost last.
#[derive(Default)]
struct Walker {
    bound: Vec<(String, Estimate)>,
}

impl Walker {
    fn walk(&mut self, expr: &IdedExpr, depth: usize) -> Result<Estimate, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep { max: MAX_DEPTH });
        }
        let depth = depth + 1;
        match &expr.expr {
            Expr::Unspecified => Ok(Estimate::scalar(1)),
            Expr::Literal(literal) => Ok(literal_estimate(literal)),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                if is_device(&select.operand, &self.bound)
                    && !DEVICE_FIELDS.contains(&select.field.as_str())
                {
                    return Err(CompileError::NoSuchField(select.field.clone()));
                }
                let operand = self.walk(&select.operand, depth)?;
                Ok(Estimate {
                    cost: operand.cost.saturating_add(1),
                    size: operand.elem,
                    elem: operand.elem,
                })
            }
            Expr::Call(call) => {
                if !FUNCTIONS.contains(&call.func_name.as_str()) {
                    return Err(CompileError::UnsupportedFunction(call.func_name.clone()));
                }
                let mut args = Vec::with_capacity(call.args.len() + 1);
                for arg in call.target.as_deref().into_iter().chain(&call.args) {
                    args.push(self.walk(arg, depth)?);
                }
                Ok(call_estimate(&call.func_name, &args))
            }
            Expr::List(list) => {
                let elements = self.walk_all(list.elements.iter(), depth)?;
                Ok(collection(&elements, list.elements.len()))
            }
            Expr::Map(map) => {
                let mut parts = Vec::with_capacity(map.entries.len() * 2);
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return Err(CompileError::Unsupported("struct fields in a map literal"));
                    };
                    parts.push(self.walk(&entry.key, depth)?);
                    parts.push(self.walk(&entry.value, depth)?);
                }
                Ok(collection(&parts, map.entries.len()))
            }
            Expr::Struct(_) => Err(CompileError::Unsupported("message literals")),
            Expr::Comprehension(comprehension) => {
                let range = self.walk(&comprehension.iter_range, depth)?;
                let init = self.walk(&comprehension.accu_init, depth)?;
                let item = Estimate::scalar(1).with_size(range.elem);
                // A list accumulator (`map`, `filter`) may collect one entry per element.
                let collects = matches!(comprehension.accu_init.expr, Expr::List(_));
                let accu = Estimate {
                    cost: 1,
                    size: if collects {
                        init.size.saturating_add(range.size)
                    } else {
                        init.size
                    },
                    elem: init.elem.max(range.elem),
                };
                let mut bound = vec![(comprehension.iter_var.clone(), item)];
                if let Some(second) = &comprehension.iter_var2 {
                    bound.push((second.clone(), item));
                }
                bound.push((comprehension.accu_var.clone(), accu));
                let before = self.bound.len();
                self.bound.extend(bound);
                let body = self.walk(&comprehension.loop_cond, depth).and_then(|cond| {
                    let step = self.walk(&comprehension.loop_step, depth)?;
                    Ok((cond, step))
                });
                let result = body.and_then(|(cond, step)| {
                    let result = self.walk(&comprehension.result, depth)?;
                    Ok((cond, step, result))
                });
                self.bound.truncate(before);
                let (cond, step, result) = result?;
                // Each step may copy the accumulator (appending to a list).
                let per_item = cond
                    .cost
                    .saturating_add(step.cost)
                    .saturating_add(accu.size);
                Ok(Estimate {
                    cost: range
                        .cost
                        .saturating_add(init.cost)
                        .saturating_add(range.size.saturating_mul(per_item))
                        .saturating_add(result.cost),
                    size: result.size.max(accu.size),
                    elem: result.elem.max(step.size),
                })
            }
        }
    }

    fn walk_all<'e>(
        &mut self,
        exprs: impl Iterator<Item = &'e IdedExpr>,
        depth: usize,
    ) -> Result<Vec<Estimate>, CompileError> {
        exprs.map(|e| self.walk(e, depth)).collect()
    }

    fn ident(&self, name: &str) -> Result<Estimate, CompileError> {
        if let Some((_, estimate)) = self.bound.iter().rev().find(|(bound, _)| bound == name) {
            return Ok(*estimate);
        }
        if name == "device" {
            return Ok(Estimate::scalar(1).with_size(DEVICE_VALUE_SIZE));
        }
        if TYPE_NAMES.contains(&name) {
            return Ok(Estimate::scalar(1));
        }
        Err(CompileError::UnknownVariable(name.to_owned()))
    }
}

impl Estimate {
    /// The same cost, for a value of `size` entries of at most `size` each.
    fn with_size(self, size: u64) -> Self {
        Self {
            size,
            elem: size,
            ..self
        }
    }
}

/// Whether `expr` is the `device` variable itself (not a comprehension variable of
/// that name).
fn is_device(expr: &IdedExpr, bound: &[(String, Estimate)]) -> bool {
    matches!(&expr.expr, Expr::Ident(name) if name == "device")
        && !bound.iter().any(|(name, _)| name == "device")
}

fn literal_estimate(literal: &LiteralValue) -> Estimate {
    let size = match literal {
        LiteralValue::String(s) => s.inner().chars().count() as u64,
        LiteralValue::Bytes(b) => b.inner().len() as u64,
        _ => 1,
    };
    Estimate::scalar(1).with_size(size.max(1))
}

/// A list or map literal of `len` entries made of `parts`.
fn collection(parts: &[Estimate], len: usize) -> Estimate {
    Estimate {
        cost: sum_cost(parts).saturating_add(1),
        size: len as u64,
        elem: parts.iter().map(|p| p.size).max().unwrap_or(1),
    }
}

fn sum_cost(parts: &[Estimate]) -> u64 {
    parts
        .iter()
        .fold(0, |total, p| total.saturating_add(p.cost))
}

/// A call: its arguments, plus work proportional to their sizes (string scans,
/// comparisons of lists), and a result no larger than the sum of its operands.
fn call_estimate(function: &str, args: &[Estimate]) -> Estimate {
    let size_sum = args
        .iter()
        .fold(0u64, |total, a| total.saturating_add(a.size));
    let largest = args.iter().map(|a| a.size).max().unwrap_or(1);
    let elem = args.iter().map(|a| a.elem).max().unwrap_or(1);
    let cost = sum_cost(args).saturating_add(1).saturating_add(size_sum);
    let (size, elem) = match function {
        operators::ADD => (size_sum, elem),
        operators::INDEX => (elem, elem),
        // A string split into single characters at most.
        "split" => (largest, largest),
        _ => (largest, elem),
    };
    Estimate { cost, size, elem }
}

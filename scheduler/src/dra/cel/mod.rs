//! The DRA CEL environment: device selectors compiled once per expression text and
//! evaluated against one device at a time.
//!
//! [`SelectorCache::get`] compiles an expression the first time it is seen — length
//! limit, parse, then the checks of [`check`] — and hands out the shared
//! [`Selector`], compiled or carrying its [`CompileError`]. [`Selector::matches`]
//! evaluates it against a [`DeviceValue`], which the pools build once per device.
//!
//! The environment is the standard CEL library (no optional syntax, timestamps or
//! durations), the read-only part of the strings extension, and the Kubernetes
//! `quantity` and `semver` functions listed in [`check::FUNCTIONS`]. See the module
//! doc of [`crate::dra`] for what the crate cannot express.

mod check;
mod device;
mod ordered;
mod quantity;
mod semver;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ::cel::common::types::CelBool;
use ::cel::common::value::{CowVal, Val};
use ::cel::context::VariableResolver;
use ::cel::{Context, Env, Program, Value};
use parking_lot::Mutex;

pub use check::{FUNCTIONS, MAX_COST, MAX_DEPTH};
pub use device::{DeviceValue, DeviceValueError, split_name};
pub use quantity::Quantity;
pub use semver::{Semver, SemverError};

/// Longest selector accepted, in bytes (the API's limit on a CEL selector).
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// Distinct expressions kept compiled; past this the cache starts over (expressions
/// come from a handful of classes and claims, so this is only a guard).
const CACHE_CAPACITY: usize = 4096;

/// Why a selector cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("expression is {length} bytes long, more than the limit of {max}")]
    TooLong { length: usize, max: usize },
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("function {0:?} is not available in TAS's DRA CEL environment")]
    UnsupportedFunction(String),
    #[error("undeclared reference to {0:?} (only `device` is defined)")]
    UnknownVariable(String),
    #[error("device has no field {0:?}")]
    NoSuchField(String),
    #[error("{0} are not supported")]
    Unsupported(&'static str),
    #[error("expression nests deeper than {max} levels")]
    TooDeep { max: usize },
    #[error("estimated cost {estimate} exceeds the limit of {max}")]
    TooCostly { estimate: u64, max: u64 },
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why evaluating a compiled selector on a device failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The interpreter failed (a missing key, no matching overload, ...).
    #[error("{0}")]
    Runtime(String),
    /// The expression produced something else than a bool.
    #[error("expression must evaluate to bool, not {0}")]
    NotBool(String),
    /// The selector did not compile.
    #[error("not compiled: {0}")]
    NotCompiled(CompileError),
}

/// One selector expression, compiled or with the reason it is not.
#[derive(Debug)]
pub struct Selector {
    program: Result<Program, CompileError>,
}

impl Selector {
    /// Compiles `expression` against the DRA environment.
    pub fn compile(expression: &str) -> Self {
        Self {
            program: compile(expression),
        }
    }

    /// Why the selector cannot be used, if it cannot.
    pub fn error(&self) -> Option<&CompileError> {
        self.program.as_ref().err()
    }

    /// Whether `device` satisfies the selector.
    pub fn matches(&self, device: &DeviceValue) -> Result<bool, EvalError> {
        let program = self
            .program
            .as_ref()
            .map_err(|e| EvalError::NotCompiled(e.clone()))?;
        let scope = DeviceScope(device);
        let mut context = Context::with_env(Arc::clone(env()));
        context.set_variable_resolver(&scope);
        let result = Value::resolve_val(program.expression(), &context)
            .map_err(|e| EvalError::Runtime(e.to_string()))?;
        result
            .downcast_ref::<CelBool>()
            .map(|b| *b.inner())
            .ok_or_else(|| EvalError::NotBool(result.get_type().name().to_owned()))
    }
}

fn compile(expression: &str) -> Result<Program, CompileError> {
    if expression.len() > MAX_EXPRESSION_LENGTH {
        return Err(CompileError::TooLong {
            length: expression.len(),
            max: MAX_EXPRESSION_LENGTH,
        });
    }
    check::nesting(expression)?;
    // The crate's parser recurses deeply for each level of nesting: it runs on a
    // thread of its own with a stack sized for the longest accepted expression.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("dra-cel-compile".to_owned())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || {
                let program = env()
                    .compile(expression)
                    .map_err(|e| CompileError::Syntax(e.to_string()))?;
                check::check(program.expression())?;
                Ok(program)
            })
            .map_err(|e| CompileError::Internal(format!("cannot start the compile thread: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(CompileError::Internal("the CEL parser panicked".to_owned())))
    })
}

/// Stack of the compile thread: the parser needs tens of KiB per nesting level in
/// debug builds, and [`MAX_DEPTH`] levels of brackets or operators are accepted.
const PARSER_STACK_BYTES: usize = 64 << 20;

/// Compiled selectors by expression text, shared by every allocation.
#[derive(Debug, Default)]
pub struct SelectorCache {
    compiled: Mutex<HashMap<String, Arc<Selector>>>,
}

impl SelectorCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The selector for `expression`, compiled on first use.
    pub fn get(&self, expression: &str) -> Arc<Selector> {
        if let Some(found) = self.compiled.lock().get(expression) {
            return Arc::clone(found);
        }
        // Compiled outside the lock: another thread may compile it too, same result.
        let selector = Arc::new(Selector::compile(expression));
        let mut compiled = self.compiled.lock();
        if compiled.len() >= CACHE_CAPACITY {
            compiled.clear();
        }
        compiled.insert(expression.to_owned(), Arc::clone(&selector));
        selector
    }

    /// How many expressions are cached.
    pub fn len(&self) -> usize {
        self.compiled.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Resolves `device` to the device being looked at.
struct DeviceScope<'a>(&'a DeviceValue);

impl VariableResolver for DeviceScope<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then(|| CowVal::Borrowed(self.0.as_val() as &dyn Val))
    }
}

/// The environment, built once.
pub(crate) fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib().with_optional_support(false);
        let declared = env
            .add_extension(::cel::extensions::strings)
            .and_then(|()| quantity::register(&mut env))
            .and_then(|()| semver::register(&mut env));
        // Fixed declarations: a conflict is a programming error caught by any test.
        if let Err(e) = declared {
            panic!("the DRA CEL environment declares a function twice: {e}");
        }
        Arc::new(env)
    })
}

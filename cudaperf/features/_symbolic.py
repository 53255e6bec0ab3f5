"""Symbolic values for reading CUDA index expressions: polynomials over named symbols with an opaque remainder.

A :class:`Form` is ``sum(coef * monomial) + <unknown part>``, where a monomial is a product of symbols
(``threadIdx.x``, ``blockIdx.x``, ``blockDim.x``, kernel parameters, ...). The unknown part stands for whatever
could not be followed (``i % n``, ``min(i, n)``, a load ``idx[i]``, a loop-varying increment); it remembers the
symbols it depends on, so two questions can still be answered exactly:

* :meth:`Form.coefficient` -- the derivative with respect to one symbol (``threadIdx.x`` for coalescing). It is a
  number when the form is linear in that symbol with a constant coefficient and the unknown part does not depend
  on it; otherwise None ("unresolved").
* :meth:`Form.depends_on_prefix` -- whether anything in the value depends on, e.g., ``threadIdx.`` (divergence).

Nothing here knows about tree-sitter; :mod:`cudaperf.features.paper` builds forms from the syntax tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Number = int | float
Monomial = tuple[str, ...]
"""A sorted tuple of symbol names (with repeats for powers); ``()`` is the constant term."""

MAX_TERMS = 48
"""A product whose expansion would exceed this many monomials collapses into an unknown value (keeps it cheap)."""

THREAD_X = "threadIdx.x"


@dataclass(frozen=True, slots=True)
class Form:
    """``sum(terms[m] * m) + unknown``; ``opaque`` says whether the unknown part exists, ``deps`` what it reads."""

    terms: dict[Monomial, Number] = field(default_factory=dict)
    opaque: bool = False
    deps: frozenset[str] = frozenset()

    # ----------------------------------------------------------------- constructors
    @staticmethod
    def const(value: Number) -> Form:
        """The exact constant ``value``."""
        return Form({(): value} if value else {})

    @staticmethod
    def symbol(name: str) -> Form:
        """The single symbol ``name`` with coefficient 1."""
        return Form({(name,): 1})

    @staticmethod
    def unknown(deps: frozenset[str] | set[str] = frozenset()) -> Form:
        """A value that cannot be followed, depending on the symbols ``deps``."""
        return Form({}, True, frozenset(deps))

    @staticmethod
    def unknown_of(*forms: Form) -> Form:
        """An unknown value computed from ``forms`` (it depends on every symbol they read)."""
        deps: set[str] = set()
        for f in forms:
            deps |= f.symbols()
        return Form.unknown(deps)

    # ----------------------------------------------------------------- queries
    def symbols(self) -> frozenset[str]:
        """Every symbol the value reads, in its monomials or in its unknown part."""
        out = set(self.deps)
        for mono in self.terms:
            out.update(mono)
        return frozenset(out)

    @property
    def is_const(self) -> bool:
        """True when the value is an exact number."""
        return not self.opaque and all(m == () for m in self.terms)

    @property
    def const_value(self) -> Number | None:
        """The number when :attr:`is_const`, else None."""
        return self.terms.get((), 0) if self.is_const else None

    def depends_on(self, symbol: str) -> bool:
        """Whether ``symbol`` appears anywhere in the value."""
        return symbol in self.symbols()

    def depends_on_prefix(self, prefix: str) -> bool:
        """Whether any symbol starting with ``prefix`` (e.g. ``"threadIdx."``) appears in the value."""
        return any(s.startswith(prefix) for s in self.symbols())

    def coefficient(self, symbol: str = THREAD_X) -> Number | None:
        """d(value)/d(symbol) when it is a constant, else None.

        0 when the value does not read ``symbol``; None when the unknown part reads it or when ``symbol`` appears
        in a monomial with other symbols or squared (``threadIdx.x * n``, ``threadIdx.x * threadIdx.x``).
        """
        if symbol in self.deps:
            return None
        coef: Number = 0
        for mono, c in self.terms.items():
            if symbol not in mono:
                continue
            if mono != (symbol,):
                return None
            coef = c
        return coef

    # ----------------------------------------------------------------- arithmetic
    def __add__(self, other: Form) -> Form:
        terms = dict(self.terms)
        for mono, c in other.terms.items():
            s = terms.get(mono, 0) + c
            if s:
                terms[mono] = s
            else:
                terms.pop(mono, None)
        return Form(terms, self.opaque or other.opaque, self.deps | other.deps)

    def __neg__(self) -> Form:
        return self.scale(-1)

    def __sub__(self, other: Form) -> Form:
        return self + (-other)

    def scale(self, k: Number) -> Form:
        """``k * self``; the unknown part stays unknown (scaled by an exact number)."""
        if k == 0:
            return Form.const(0)
        return Form({m: c * k for m, c in self.terms.items()}, self.opaque, self.deps)

    def __mul__(self, other: Form) -> Form:
        if self.is_const:
            return other.scale(self.const_value or 0)
        if other.is_const:
            return self.scale(other.const_value or 0)
        if self.opaque or other.opaque or len(self.terms) * len(other.terms) > MAX_TERMS:
            return Form.unknown_of(self, other)
        terms: dict[Monomial, Number] = {}
        for ma, ca in self.terms.items():
            for mb, cb in other.terms.items():
                mono = tuple(sorted(ma + mb))
                s = terms.get(mono, 0) + ca * cb
                if s:
                    terms[mono] = s
                else:
                    terms.pop(mono, None)
        return Form(terms)

    def join(self, other: Form, symbol: str = THREAD_X) -> Form:
        """A value that may be either ``self`` or ``other`` (a variable assigned in a branch or a loop).

        Keeps the coefficient of ``symbol`` when both agree on it; everything else becomes unknown.
        """
        if self == other:
            return self
        ca, cb = self.coefficient(symbol), other.coefficient(symbol)
        deps = set(self.symbols() | other.symbols())
        if ca is None or cb is None or ca != cb:
            return Form.unknown(deps)
        deps.discard(symbol)
        return Form({(symbol,): ca} if ca else {}, True, frozenset(deps))


@dataclass(frozen=True, slots=True)
class Dim3:
    """A ``dim3`` value: three forms (missing dimensions are 1)."""

    dims: tuple[Form, Form, Form]

    @staticmethod
    def of(forms: list[Form]) -> Dim3:
        """``dim3(a[, b[, c]])``; extra arguments beyond three are ignored."""
        padded = list(forms[:3]) + [Form.const(1)] * (3 - min(len(forms), 3))
        return Dim3((padded[0], padded[1], padded[2]))

    def product(self) -> Form:
        """x * y * z, as a form (a number when every dimension is a constant)."""
        return self.dims[0] * self.dims[1] * self.dims[2]

    def with_dim(self, index: int, value: Form) -> Dim3:
        """A copy with dimension ``index`` (0..2) replaced."""
        dims = list(self.dims)
        dims[index] = value
        return Dim3((dims[0], dims[1], dims[2]))


@dataclass(frozen=True, slots=True)
class Pointer:
    """A pointer value: ``base + offset`` in elements. ``global_`` is True for kernel pointer parameters."""

    base: str
    offset: Form
    global_: bool

    def shifted(self, delta: Form) -> Pointer:
        """The pointer ``delta`` elements further."""
        return Pointer(self.base, self.offset + delta, self.global_)


@dataclass(frozen=True, slots=True)
class LocalArray:
    """An array that is not in global memory: ``__shared__`` (``shared``) or a thread-local array."""

    name: str
    shared: bool


Value = Form | Dim3 | Pointer | LocalArray


def as_form(value: Value | None) -> Form:
    """The value as a form: pointers give their offset, dim3 its product, arrays an unknown."""
    if isinstance(value, Form):
        return value
    if isinstance(value, Pointer):
        return value.offset
    if isinstance(value, Dim3):
        return value.product()
    return Form.unknown()


def join_values(old: Value | None, new: Value) -> Value:
    """The value of a variable that holds ``old`` or ``new`` depending on control flow."""
    if old is None:
        return new
    if isinstance(old, Form) and isinstance(new, Form):
        return old.join(new)
    if isinstance(old, Pointer) and isinstance(new, Pointer) and old.base == new.base:
        return Pointer(old.base, old.offset.join(new.offset), old.global_)
    if isinstance(new, Pointer) and isinstance(old, Form) and old.opaque and not old.terms:
        return new  # pointer declared uninitialised, assigned in a branch
    if old == new:
        return old
    return new if type(old) is type(new) and isinstance(new, (Dim3, LocalArray)) else Form.unknown_of(
        as_form(old), as_form(new)
    )

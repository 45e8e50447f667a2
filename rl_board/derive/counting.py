"""How a sample's positions are counted, for every sample of a block at once: its per-token lists
flattened with their owners (``FlatList``), its tokens (``Tokens``: strings, or ids decoded once
each, ``Ids``), its loss mask (``Mask``), and the counted positions (``Counted``: up to the pad, up
to and including the EOS, or where the mask says; see ``metrics``). No Python per sample.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..readers import ReadOptions
from .tokenizer import decode_ids


def array(values, type_: pa.DataType):
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values if values.type == type_ else values.cast(type_)
    return pa.array(values, type=type_)


class FlatList:
    """One per-token list column, flat: ``lengths`` (-1 where a sample has none), ``values``
    (float64, samples one after another), ``owner`` and ``position`` of each value. With
    ``values`` False only the lengths are read (a list shown, never aggregated)."""

    def __init__(self, column: pa.ChunkedArray, like: FlatList | None = None, values: bool = True):
        array, self.lengths = list_column(column)
        self.any = bool((self.lengths >= 0).any())
        self.has_values = values
        self._kept = None
        if self.any and values:
            self.values = array.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            if like is not None and np.array_equal(like.lengths, self.lengths):  # lists of one length: shared
                self.owner, self.position, self._like = like.owner, like.position, like
            else:
                self.owner, self.position, self._like = *owners_of(self.lengths), None

    def cut(self, counted: Counted) -> tuple[np.ndarray, np.ndarray]:
        """(values, owner) at each sample's counted positions."""
        if self._like is not None and self._like._kept is not None:
            self._kept = self._like._kept
        else:
            keep = counted.at(self.owner, self.position)
            self._kept = keep, self.owner[keep]
        keep, owner = self._kept
        return self.values[keep], owner


class Ids:
    """The ``token_ids`` column, flat: ``lengths`` (-1 where none), ``values`` (int64, samples one
    after another), ``starts`` (each sample's first value) and ``used`` (bool, shape (samples,):
    the sample's tokens are its ids, as it has no ``response_tokens``)."""

    def __init__(self, column: pa.ChunkedArray, strings: pa.ChunkedArray):
        array, self.lengths = list_column(column)
        flat = array.flatten()
        self.values = (flat.to_numpy(zero_copy_only=False).astype(np.int64, copy=False) if len(flat)
                       else np.zeros(0, np.int64))
        sizes = np.maximum(self.lengths, 0)
        self.starts = np.cumsum(sizes) - sizes
        self.used = (self.lengths >= 0) & strings.is_null().to_numpy(zero_copy_only=False)

    def of(self, sample: int, start: int = 0, stop: int | None = None) -> list[int]:
        """The ids of one sample, positions [start, stop)."""
        end = self.starts[sample] + self.lengths[sample]
        first = self.starts[sample] + start
        last = end if stop is None else min(end, self.starts[sample] + stop)
        return self.values[first:last].tolist()


class Tokens:
    """Each sample's tokens, flat: its ``response_tokens``, else its ``token_ids`` (``Ids.used``)
    as token strings (``tokenizer.decode_ids``). ``lengths`` (-1 where none), ``ids`` (int64, one
    per token; equal strings, equal ids), ``owner`` and ``position``, and ``vocabulary``; ``raw``
    (int64, one per token): the token id for a sample whose tokens are ids, else -1."""

    def __init__(self, column: pa.ChunkedArray, token_ids: Ids | None = None, tokenizer=None):
        array, self.lengths = list_column(column)
        flat = array.flatten()
        self.vocabulary = flat.dictionary.to_pylist() if len(flat) else []
        self.ids = flat.indices.to_numpy(zero_copy_only=False).astype(np.int64) if len(flat) else np.zeros(0, np.int64)
        self.raw = np.full(len(self.ids), -1, np.int64)
        if token_ids is not None and token_ids.used.any():
            self._add_ids(token_ids, tokenizer)
        if len(set(self.vocabulary)) != len(self.vocabulary):  # a dictionary may repeat a string
            index = {}
            remap = np.array([index.setdefault(t, len(index)) for t in self.vocabulary], np.int64)
            self.ids = remap[self.ids]
            self.vocabulary = list(index)
        self.owner, self.position = owners_of(self.lengths)

    def gram_ids(self) -> np.ndarray:
        """One id per token for counting 4-grams: the token id itself where the tokens are ids (two
        ids that decode alike are still two tokens), else the string's id; int64."""
        return np.where(self.raw >= 0, self.raw + len(self.vocabulary), self.ids)

    def _add_ids(self, token_ids: Ids, tokenizer) -> None:
        """Take the decoded ids of the samples whose tokens are their ids (each distinct id decoded once)."""
        owner, _ = owners_of(token_ids.lengths)
        taken = token_ids.used[owner]
        strings, where = decode_ids(tokenizer, token_ids.values[taken])
        own, _ = owners_of(self.lengths)
        ids = np.concatenate([self.ids, where.astype(np.int64) + len(self.vocabulary)])
        raw = np.concatenate([self.raw, token_ids.values[taken]])
        owners = np.concatenate([own, owner[taken]])
        order = np.argsort(owners, kind="stable")  # each part's owners ascend: merge them
        self.ids, self.raw = ids[order], raw[order]
        self.vocabulary = self.vocabulary + strings
        self.lengths = np.where(token_ids.used, token_ids.lengths, self.lengths)

    def id_of(self, token: str | None) -> int | None:
        if token is None:
            return None
        try:
            return self.vocabulary.index(token)
        except ValueError:
            return None


class Mask:
    """The ``loss_mask`` column, flat: ``lengths`` (-1 where none), ``values`` (bool, samples one after
    another; true = trained) and ``starts`` (each sample's first value)."""

    def __init__(self, column: pa.ChunkedArray):
        array, self.lengths = list_column(column)
        self.any = bool((self.lengths >= 0).any())
        flat = array.flatten()
        self.values = (flat.fill_null(False).to_numpy(zero_copy_only=False).astype(bool) if len(flat)
                       else np.zeros(0, bool))
        sizes = np.maximum(self.lengths, 0)
        self.starts = np.cumsum(sizes) - sizes

    def first_last(self) -> tuple[np.ndarray, np.ndarray]:
        """(each sample's first and last trained position; -1 where none)."""
        owner, position = owners_of(self.lengths)
        first = np.full(len(self.lengths), -1)
        last = np.full(len(self.lengths), -1)
        samples, at = first_hit(self.values, owner, position)
        first[samples] = at
        hit = self.values[::-1]
        samples, at = first_hit(hit, owner[::-1], position[::-1])
        last[samples] = at
        return first, last


class Counted:
    """Each sample's counted positions (``metrics``): with a loss mask, the positions below n where
    it is true; without one, the first ``limit`` positions (the pad/EOS rule). ``count``: how many
    (int64, shape (samples,))."""

    def __init__(self, n: np.ndarray, tokens: Tokens, mask: Mask, options: ReadOptions):
        self.masked = mask.lengths >= 0
        by_rule, self.ended = counted_positions(n, tokens, options)  # ended: an EOS among the counted (pad/EOS rule)
        self.limit = np.where(self.masked, n, by_rule)
        self.mask = mask
        self.count = self.limit
        if mask.any:
            owner, position = owners_of(mask.lengths)
            trained = mask.values & (position < n[owner])
            self.count = np.where(self.masked, np.bincount(owner[trained], minlength=len(n)), self.limit)

    def at(self, owner: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Whether each (sample, position) is counted; bool, shape of the inputs."""
        keep = position < self.limit[owner]
        if self.mask.any:
            idx = np.flatnonzero(keep & self.masked[owner])
            samples, places = owner[idx], position[idx]
            inside = places < self.mask.lengths[samples]
            trained = np.zeros(len(idx), bool)
            trained[inside] = self.mask.values[self.mask.starts[samples[inside]] + places[inside]]
            keep[idx] = trained
        return keep


def list_column(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """(a list column as one array, each sample's list length: int64, -1 where it has none)."""
    array = column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)
    return array, array.value_lengths().fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def owners_of(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For flat values of samples with ``lengths`` (-1 = none): each value's sample and position."""
    sizes = np.maximum(lengths, 0)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.cumsum(sizes) - sizes
    return owner, np.arange(len(owner)) - starts[owner]


def first_hit(hit: np.ndarray, owner: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(samples, the position of their first hit) for the flagged values (owners ascending)."""
    owners = owner[hit]
    first = np.r_[True, owners[1:] != owners[:-1]] if len(owners) else np.zeros(0, bool)
    return owners[first], position[hit][first]


def counted_positions(n: np.ndarray, tokens: Tokens, options: ReadOptions) -> tuple[np.ndarray, np.ndarray]:
    """(counted positions per sample by the pad/EOS rule (``metrics.token_positions``, for every sample
    at once): each sample's first so many positions; whether an EOS is among them)."""
    counted = n.copy()
    eos_at = np.full(len(n), np.iinfo(np.int64).max)  # the first EOS's position (none: beyond any)
    inside = tokens.position < n[tokens.owner]
    eos, pad = options.eos_token, options.pad_token
    eos_id = tokens.id_of(eos)
    if eos_id is not None:
        samples, at = first_hit(inside & (tokens.ids == eos_id), tokens.owner, tokens.position)
        counted[samples] = at + 1
        eos_at[samples] = at
    pad_id = tokens.id_of(pad) if pad != eos else None  # P = E: the first one is the EOS, which counts
    if pad_id is not None:
        samples, at = first_hit(inside & (tokens.ids == pad_id), tokens.owner, tokens.position)
        counted[samples] = np.minimum(counted[samples], at)
    return counted, eos_at < counted  # a pad before the EOS leaves it out


def truncated(n: np.ndarray, counted: Counted, tokens: Tokens, options: ReadOptions) -> np.ndarray:
    """Per sample: 1.0 when no EOS is among its counted positions and they fill its lists (counted = n),
    0.0 otherwise, NaN without an EOS token, without tokens, or with a loss mask (the mask, not an EOS,
    says what was generated)."""
    out = np.where(~counted.ended & (counted.limit == n), 1.0, 0.0)
    if options.eos_token is None:
        out[:] = np.nan
    out[tokens.lengths < 0] = np.nan
    out[counted.masked] = np.nan
    return out


def above_zero(flat: FlatList, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(how many of each sample's values are above 0, the largest of them; NaN without any)."""
    above = np.zeros(count, np.int32)
    largest = np.full(count, np.nan)
    if flat.any:
        hit = flat.values > 0  # NaN is not
        owners = flat.owner[hit]
        above = np.bincount(owners, minlength=count).astype(np.int32)
        peak = np.full(count, -np.inf)
        np.maximum.at(peak, owners, flat.values[hit])
        largest = np.where(above > 0, peak, np.nan)
    return above, largest

/*
 * The loader contract (issue 41, docs/ARCHITECTURE.md "The loader
 * contract"): what a reader expects of a file's tensors, checked once, here,
 * for every reader — tfcore checkpoints, Hugging Face directories, llm.c
 * files, LoRA/PEFT adapters, token shards.
 *
 * A reader describes two lists and hands them over:
 *
 *   wanted  the tensors it expects (tfc_want): name (and the one other name
 *           a format may use), shape — sizes, or symbols the file binds,
 *           such as a LoRA rank —, the dtypes it converts from, whether the
 *           tensor is required, optional, or an ignorable buffer, and where
 *           its values go. lib/model builds this list from the model's one
 *           parameter table; this layer knows nothing of models.
 *   held    what the file holds (tfc_held): names, dtypes, shapes, byte
 *           spans where the format computes them, and the values.
 *
 * tfc_contract_check then enforces, before anything is written:
 *
 *   1. every tensor in the file is consumed (matched to a wanted one, under
 *      one of its names, never under both), or the load is refused naming
 *      the file and the tensor;
 *   2. every required tensor is present, and the tensors of a group are all
 *      present or all absent (a LoRA layer's A and B);
 *   3. every dtype is one the reader converts from, checked before any
 *      conversion;
 *   4. every shape is the wanted one, a symbol taking one value across all
 *      tensors and lying in its bounds;
 *   5. a tensor that must repeat another (a tied head stored twice) holds
 *      its bytes;
 *   6. every metadata field that describes the tensors (a claim on a
 *      symbol: tfc.lora.rank, adapter_config.json's r) agrees with them;
 *   7. where the format computes spans, the tensors' bytes tile the data
 *      exactly: nothing missing, nothing trailing.
 *
 * and tfc_contract_copy writes each wanted tensor's values into its
 * destination only after the whole check passed, so nothing is half-loaded.
 * Faults are reported as "fn: 'file' ..." naming the tensor and the shapes
 * (the file of the held tensor at fault where the reader gave one: a shard);
 * a reader may word a fault in its format's own terms (tfc_contract_explain).
 *
 * Not thread-safe: a contract belongs to the one load that builds it.
 */
#ifndef TFC_IO_TENSOR_CONTRACT_H
#define TFC_IO_TENSOR_CONTRACT_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/io.h"
#include "tfcore/tensor.h"

/* A wanted dimension bound by the file: symbol k of the contract (tfc_contract_add_symbol). */
#define TFC_DIM_SYM(k) (-1 - (int64_t)(k))
/* A dtype set for tfc_want.dtypes: one bit per dtype. */
#define TFC_DTYPE_BIT(d) (1u << (unsigned)(d))
/* The float dtypes a model converts from (f32, f64, bf16, f16). */
#define TFC_DTYPES_FLOAT                                                                           \
    (TFC_DTYPE_BIT(TFC_DTYPE_F32) | TFC_DTYPE_BIT(TFC_DTYPE_F64) | TFC_DTYPE_BIT(TFC_DTYPE_BF16) | \
     TFC_DTYPE_BIT(TFC_DTYPE_F16))

typedef enum tfc_want_presence {
    TFC_WANT_REQUIRED = 0, /* must be present */
    TFC_WANT_OPTIONAL = 1, /* may be absent; when present, checked and loaded as a required one */
    TFC_WANT_IGNORED = 2,  /* may be present, and then consumed without being read (HF's attention mask buffers) */
} tfc_want_presence;

/* A tensor the reader expects. */
typedef struct tfc_want {
    const char *name;           /* as the file names it; copied by tfc_contract_want */
    const char *alias;          /* nullable: the one other name a file may use for it (copied) */
    int32_t ndim;               /* -1: any shape (an ignored buffer, or one whose own door checks it) */
    int64_t dims[TFC_MAX_DIMS]; /* sizes >= 0, or TFC_DIM_SYM(k) */
    uint32_t dtypes;            /* TFC_DTYPE_BIT of each dtype accepted; 0: any */
    int32_t presence;           /* tfc_want_presence */
    int32_t group;              /* > 0: the wants of one group are all present or all absent */
    int32_t same_as;            /* >= 0: when present, must hold the very bytes of want same_as; -1: no such rule */
    tfc_tensor *dest; /* nullable: where tfc_contract_copy puts the values (borrowed; converted to its dtype) */
    const char *hint; /* nullable: appended to a fault's message (copied), e.g. what config.json says */
} tfc_want;

/* A tfc_want with everything off: required, no alias, any dtype, no group, no twin, no destination. */
#define TFC_WANT_INIT \
    { NULL, NULL, 0, {0}, 0, TFC_WANT_REQUIRED, 0, -1, NULL, NULL }

/*
 * A held tensor's done hook: the contract has finished reading bytes
 * [from, to) of values (offsets from its first element) and will not need
 * them again soon; a reader over mapped memory gives their pages back
 * (tfc_safetensors_done). Advisory: the bytes must stay readable (a
 * mapping re-reads a dropped page from its file). Never fails.
 */
typedef void (*tfc_held_done)(void *ctx, const tfc_tensor *values, uint64_t from, uint64_t to);

/* A tensor the file holds. */
typedef struct tfc_held {
    const char *name; /* copied by tfc_contract_hold */
    tfc_dtype dtype;
    int32_t ndim;
    int64_t dims[TFC_MAX_DIMS];
    uint64_t begin, end; /* its bytes in the file, where the format computes them (tfc_contract_set_span) */
    tfc_tensor *values;  /* nullable: the values as the destination takes them (a new reference, taken over) */
    /*
     * nullable: the file that holds it when a load reads several (a shard of
     * a Hugging Face directory), named in faults about this tensor instead
     * of the contract's file (copied by tfc_contract_hold)
     */
    const char *file;
    tfc_held_done done; /* nullable: called as the contract finishes with spans of values (above) */
    void *done_ctx;
} tfc_held;

/* What went wrong, for a reader that words faults itself (tfc_contract_explain). */
typedef enum tfc_fault_kind {
    TFC_FAULT_STRANGER,   /* held tensor `held` is no wanted tensor */
    TFC_FAULT_TWICE,      /* want `want` is held under both names: held `held` and held `other` */
    TFC_FAULT_MISSING,    /* required want `want` is not held */
    TFC_FAULT_GROUP,      /* want `want` (held) has group mate `other` not held */
    TFC_FAULT_DTYPE,      /* held `held` for want `want` has a dtype the want does not take */
    TFC_FAULT_SHAPE,      /* held `held` for want `want` has another shape (rank or a size) */
    TFC_FAULT_SYM_RANGE,  /* symbol `other` would be `value`, outside its bounds (held `held`, want `want`) */
    TFC_FAULT_SYM_DIFFER, /* symbol `other` is `expected` from an earlier tensor, `value` in held `held` */
    TFC_FAULT_NOT_SAME,   /* held `held` for want `want` does not repeat the bytes of want same_as */
    TFC_FAULT_CLAIM,      /* claim `other` says `expected`, the tensors bind its symbol to `value` */
    TFC_FAULT_SPAN,       /* the tensors' bytes end at `value`, the data at `expected` (held `held` overlaps or
                             leaves a gap when >= 0) */
} tfc_fault_kind;

typedef struct tfc_fault {
    tfc_fault_kind kind;
    int32_t want, held, other; /* indices into the contract's lists, -1 where none */
    int64_t value, expected;
} tfc_fault;

/* A symbol: a size the file binds (a LoRA rank, llm.c's padded vocabulary), within [lo, hi]. */
typedef struct tfc_contract_sym {
    char *name; /* in shapes: "[r,32]" */
    int64_t lo, hi;
    int64_t value; /* bound value; meaningful when bound */
    int32_t bound;
} tfc_contract_sym;

/* Metadata that says what a symbol is. */
typedef struct tfc_contract_claim {
    int32_t sym;
    int64_t value;
    char *who; /* "metadata tfc.lora.rank" */
} tfc_contract_claim;

typedef struct tfc_contract tfc_contract;

/*
 * A reader's own words for fault f: report it with tfc_err and return that
 * status, or return TFC_OK to have the contract's words. ctx is the
 * reader's (tfc_contract_set_explain).
 */
typedef tfc_status (*tfc_contract_explain)(void *ctx, const tfc_contract *c, const tfc_fault *f);

struct tfc_contract {
    const char *fn; /* the public function a fault is reported under */
    char *file;     /* the file, for messages */
    char *model;    /* who wants the tensors, for messages: "the model of its metadata (n_layer 2, ...)" */
    tfc_want *want; /* n_want, in the order faults are looked for */
    tfc_held *held; /* n_held, in file order */
    int32_t n_want, n_held, cap_want, cap_held;
    tfc_contract_sym sym[4];
    int32_t n_sym;
    tfc_contract_claim claim[4];
    int32_t n_claim;
    int32_t spans; /* rule 7 applies: the held spans tile [data_begin, data_end) */
    uint64_t data_begin, data_end;
    int32_t *match;               /* after a check: want i is held[match[i]], or -1 when absent */
    int32_t checked;              /* tfc_contract_check passed */
    tfc_contract_explain explain; /* nullable */
    void *explain_ctx;
};

/*
 * A new empty contract for a load by fn of `file`, whose tensors `model`
 * wants (both copied; for messages). Errors: TFC_ERR_OOM.
 */
tfc_status tfc_contract_new(const char *fn, const char *file, const char *model, tfc_contract **out);
/* Free c, its copies and the held values' references (NULL accepted). */
void tfc_contract_free(tfc_contract *c);

/* Append a wanted tensor (its strings copied); its index is the count before. Errors: TFC_ERR_OOM, a bad want (TFC_ERR_INTERNAL). */
tfc_status tfc_contract_want(tfc_contract *c, const tfc_want *w);
/*
 * Append a held tensor (its name and file copied, its values reference
 * taken over even on error). Errors: TFC_ERR_OOM.
 */
tfc_status tfc_contract_hold(tfc_contract *c, const tfc_held *h);
/*
 * Every tensor of a loaded safetensors file as held (names, dtypes, shapes,
 * values; spans are the reader's rule), each with tfc_safetensors_done as
 * its done hook, so the pages of a mapped file's tensor leave memory as it
 * is copied.
 */
tfc_status tfc_contract_hold_safetensors(tfc_contract *c, const tfc_safetensors *f);
/* As tfc_contract_hold_safetensors, each held tensor naming `file` (nullable: the contract's) in faults. */
tfc_status tfc_contract_hold_safetensors_in(tfc_contract *c, const tfc_safetensors *f, const char *file);
/*
 * A new symbol named name (for shapes in messages) bound within [lo, hi];
 * *k its index for TFC_DIM_SYM(k). Errors: more than 4 (TFC_ERR_INTERNAL).
 */
tfc_status tfc_contract_add_symbol(tfc_contract *c, const char *name, int64_t lo, int64_t hi, int32_t *k);
/* Metadata `who` says symbol k is value (checked once the tensors bind it). Errors: more than 4, TFC_ERR_OOM. */
tfc_status tfc_contract_add_claim(tfc_contract *c, int32_t k, int64_t value, const char *who);
/* Rule 7: the held spans must tile [begin, end) exactly. */
void tfc_contract_set_span(tfc_contract *c, uint64_t begin, uint64_t end);
/* The reader's own words for faults (nullable: the contract's). */
void tfc_contract_set_explain(tfc_contract *c, tfc_contract_explain explain, void *ctx);

/*
 * Rules 1-7, in that order, nothing written. TFC_OK, or the first fault:
 * TFC_ERR_FORMAT (or the status the reader's words chose) with a message
 * "fn: 'file' ..." naming the tensor.
 */
tfc_status tfc_contract_check(tfc_contract *c);
/*
 * After a passing check: each present want with a destination gets its
 * held values (tfc_tensor_copy_from, converting to the destination's dtype).
 * A held tensor with a done hook is copied in steps of about 8 MiB of its
 * bytes (whole rows of its first dimension), the hook called after each,
 * so a mapped file's pages are given back while the tensor is copied; the
 * rule-5 comparison of twins does the same. Errors: no passing check or
 * values that do not fit the destination (TFC_ERR_INTERNAL: the reader
 * built them wrong), a device copy's error.
 */
tfc_status tfc_contract_copy(tfc_contract *c);
/* tfc_contract_check, then tfc_contract_copy. */
tfc_status tfc_contract_load(tfc_contract *c);

/* After a passing check: the held tensor of want i, or NULL when absent (borrowed). */
const tfc_held *tfc_contract_found(const tfc_contract *c, int32_t i);
/* After a passing check: symbol k's value, or -1 when no tensor bound it. */
int64_t tfc_contract_sym_value(const tfc_contract *c, int32_t k);
/* A wanted shape as text, symbols by name: "[r,32]" (a thread-local ring of 4 buffers, like tfc_fmt_dims). */
const char *tfc_contract_fmt_want(const tfc_contract *c, const tfc_want *w);

#endif

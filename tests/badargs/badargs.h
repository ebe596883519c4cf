/* The table of cases gen_badargs.py writes, read by badargs_main.c. */
#ifndef TFC_BADARGS_H
#define TFC_BADARGS_H

typedef struct badargs_case {
    const char *fn;   /* the public function called */
    const char *what; /* "valid call", "x = NULL", "ndim = -1", ... */
    int (*run)(void); /* 0: pass */
    int valid;        /* the valid call of a function returning a status: the OOM mode runs these */
} badargs_case;

extern const badargs_case badargs_cases[];
extern const int badargs_n_cases;
extern const int badargs_n_functions;

#endif

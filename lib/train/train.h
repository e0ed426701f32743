/* lib/train: the optimizer (AdamW, SGD, schedule, clipping), the training step, gradient
 * shards and their sum across ranks, the training driver, and checkpoints: the mapping of
 * model and optimizer state onto safetensors files (checkpoint.c) over the file format
 * itself (safetensors.c, train/safetensors.h). Private: never installed. Includes the
 * wings below it: core, kernels, model, data, and analysis (the driver's evaluations). */
#ifndef INDUCT_TRAIN_H
#define INDUCT_TRAIN_H

#include "data/data.h"
#include "model/model.h"

/* ---- optimizer -------------------------------------------------------------- */
struct induct_optimizer {
    induct_model *model;
    uint32_t kind;
    double lr, beta1, beta2, eps, weight_decay, grad_clip, warmup, schedule, total_steps,
        min_lr_ratio, momentum;
    uint64_t step;
    float *m1; /* AdamW first moment / SGD momentum */
    float *m2; /* AdamW second moment */
    double grad_shards; /* INDUCT_OPT_GRAD_SHARDS, an integer >= 1 */
    int has_comm;       /* comm is attached (induct_optimizer_set_comm) */
    induct_comm comm;
    float *shard_buf;   /* the shard tree's partial sums and the receive buffer */
    size_t shard_buf_n; /* floats in shard_buf (counted on the model) */
};

/* One training step of o on the pass p (its tokens the whole batch, p->grad set) with
 * gradient shards and the optimizer's communicator (shards.c): the gradient of the
 * batch mean into m->grads as the fixed shard tree gives it, the loss into *loss. */
int induct__shards_grad(induct_optimizer *o, const induct__pass *p, double *loss);
/* The top levels of the shard tree across the ranks of c (n_ranks a power of two):
 * recursive halving (reduce-scatter) then doubling (all-gather) of g (n floats; recv
 * holds ceil(n/2)), and recursive doubling of *loss. On return every rank holds the
 * sums of the rank groups in the tree's order, the lower group the left operand. */
int induct__comm_tree_sum(const induct_comm *c, float *g, size_t n, float *recv,
                          double *loss);
/* *flag = 1 on every rank if it is non-zero on any rank of the optimizer's
 * communicator (recursive doubling; nothing without one). */
int induct__comm_any(induct_optimizer *o, int *flag);
/* The communicator's status as a library failure with a message. */
int induct__comm_status(int rc, const char *what);

/* checkpoint.c: the loaders over a buffer instead of a file (fuzzing, tests). */
int induct__model_load_mem(induct_model **out, const void *data, size_t len);
int induct__optimizer_load_mem(induct_optimizer **out, induct_model *m, const void *data,
                               size_t len);

#endif

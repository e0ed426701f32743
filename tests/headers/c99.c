/* Compile-only check: the public header is strict C99 (-std=c99 -pedantic -Werror
 * -Wall -Wextra). It uses every type, macro and enum the header offers, so a
 * construct newer than C99 or a compiler extension fails the build. */
#include <induct/induct.h>

#include <stddef.h>

#define NAME_(name, value, msg) "INDUCT_" #name,
static const char *const status_names[] = {INDUCT_STATUS_MAP(NAME_)};
#undef NAME_

int main(void) {
    induct_model_config mc;
    induct_rrt_config rc;
    induct_model *model = NULL;
    induct_optimizer *opt = NULL;
    induct_dataset *ds = NULL;
    induct_status st = INDUCT_OK;
    induct_opt_param p = INDUCT_OPT_LR;
    unsigned bits = INDUCT_FEATURE_OPENMP | INDUCT_POS_STANDARD | INDUCT_POS_SHORTFORMER |
                    INDUCT_POS_NONE | INDUCT_INIT_GPT2 | INDUCT_INIT_TORCH | INDUCT_BUF_PARAM |
                    INDUCT_BUF_GRAD | INDUCT_SPLIT_TRAIN | INDUCT_SPLIT_EVAL |
                    INDUCT_OPTIM_ADAMW | INDUCT_OPTIM_SGD;
    unsigned long version = INDUCT_VERSION_NUMBER + INDUCT_VERSION_MAJOR + INDUCT_VERSION_MINOR +
                            INDUCT_VERSION_PATCH + INDUCT_ABI_VERSION;
    const char *vs = INDUCT_VERSION_STRING;
    size_t n = sizeof status_names / sizeof status_names[0];
    int ok = induct_model_config_init(&mc, sizeof mc) == INDUCT_OK &&
             induct_rrt_config_init(&rc, sizeof rc) == INDUCT_OK;
    (void)model;
    (void)opt;
    (void)ds;
    (void)p;
    (void)st;
    (void)bits;
    (void)version;
    (void)vs;
    return ok && n == (size_t)(1 - INDUCT_STATUS_MIN_) ? 0 : 1;
}

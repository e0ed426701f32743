// Compile-only check: the public header is usable from C++ (extern "C", no C-only
// constructs), with -Wall -Wextra -pedantic -Werror.
#include <induct/induct.h>

#include <cstddef>
#include <type_traits>

static_assert(std::is_standard_layout<induct_model_config>::value, "C layout");
static_assert(std::is_trivially_copyable<induct_model_config>::value, "C layout");
static_assert(std::is_standard_layout<induct_rrt_config>::value, "C layout");
static_assert(std::is_trivially_copyable<induct_rrt_config>::value, "C layout");

#define NAME_(name, value, msg) "INDUCT_" #name,
static const char *const status_names[] = {INDUCT_STATUS_MAP(NAME_)};
#undef NAME_

// Taking the address with a C++ function-pointer type checks the extern "C" linkage
// and the exact signatures the C++ compiler sees.
static int (*const p_new)(induct_model **, const induct_model_config *) = induct_model_new;
static void (*const p_free)(induct_model *) = induct_model_free;
static int (*const p_set)(induct_optimizer *, induct_opt_param, double) = induct_optimizer_set;

int main() {
    induct_model_config mc;
    induct_rrt_config rc;
    induct_status st = INDUCT_EBUFSIZE;
    induct_opt_param p = INDUCT_OPT_WARMUP_STEPS;
    const std::size_t n = sizeof status_names / sizeof status_names[0];
    bool ok = induct_model_config_init(&mc, sizeof mc) == INDUCT_OK &&
              induct_rrt_config_init(&rc, sizeof rc) == INDUCT_OK;
    (void)st;
    (void)p;
    (void)p_new;
    (void)p_free;
    (void)p_set;
    return ok && n == static_cast<std::size_t>(1 - INDUCT_STATUS_MIN_) ? 0 : 1;
}

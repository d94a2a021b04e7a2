/*
 * Loads the plugin as slurmstepd, srun or sbatch would and drives its hooks, standing in for the
 * part of Slurm's SPANK API the plugin calls (spank.h's declarations, so a signature that drifted
 * fails to build). Used by plugin.test.ts:
 *
 *   harness PLUGIN.so local|remote|allocator [PLUGSTACK-ARG...] --options [NAME[=VALUE]...] --argv [ARG...]
 *
 * prints what the plugin did, a line each: "init rc=R", "registered N", "option NAME rc=R",
 * "task_init rc=R", "setenv NAME=VALUE", "argv0 PATH"; the plugin's errors go to stderr.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#define MAX_OPTIONS 64

static spank_context_t context = S_CTX_ERROR;
static struct spank_option options[MAX_OPTIONS];
static int option_count;
static int task_argc;
static char **task_argv;

spank_context_t spank_context(void) { return context; }

spank_err_t spank_option_register(spank_t spank, struct spank_option *opt)
{
  (void)spank;
  if (option_count == MAX_OPTIONS)
    return ESPANK_ERROR;
  options[option_count++] = *opt;
  return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t spank, spank_item_t item, ...)
{
  (void)spank;
  if (item != S_JOB_ARGV)
    return ESPANK_BAD_ARG;
  va_list ap;
  va_start(ap, item);
  *va_arg(ap, int *) = task_argc;
  *va_arg(ap, char ***) = task_argv;
  va_end(ap);
  return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t spank, const char *var, const char *val, int overwrite)
{
  (void)spank;
  (void)overwrite;
  printf("setenv %s=%s\n", var, val);
  return ESPANK_SUCCESS;
}

/* The job's environment is the harness's own. */
spank_err_t spank_getenv(spank_t spank, const char *var, char *buf, int len)
{
  (void)spank;
  const char *value = getenv(var);
  if (value == NULL)
    return ESPANK_ENV_NOEXIST;
  if (snprintf(buf, (size_t)len, "%s", value) >= len)
    return ESPANK_NOSPACE;
  return ESPANK_SUCCESS;
}

void slurm_error(const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static spank_context_t context_named(const char *name)
{
  if (strcmp(name, "local") == 0)
    return S_CTX_LOCAL;
  if (strcmp(name, "remote") == 0)
    return S_CTX_REMOTE;
  if (strcmp(name, "allocator") == 0)
    return S_CTX_ALLOCATOR;
  return S_CTX_ERROR;
}

/* Calls the callback of the option NAME[=VALUE] as Slurm does when srun's line or the job has it. */
static void give_option(const char *given)
{
  const char *eq = strchr(given, '=');
  size_t len = eq ? (size_t)(eq - given) : strlen(given);
  for (int i = 0; i < option_count; i++)
    if (strlen(options[i].name) == len && strncmp(options[i].name, given, len) == 0) {
      int rc = options[i].cb(options[i].val, eq ? eq + 1 : NULL, context == S_CTX_REMOTE);
      printf("option %.*s rc=%d\n", (int)len, given, rc);
      return;
    }
  printf("option %.*s unknown\n", (int)len, given);
}

static int find(int argc, char **argv, const char *word)
{
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], word) == 0)
      return i;
  fprintf(stderr, "harness: %s missing\n", word);
  exit(2);
}

int main(int argc, char **argv)
{
  if (argc < 3)
    return 2;
  void *plugin = dlopen(argv[1], RTLD_NOW);
  if (plugin == NULL) {
    fprintf(stderr, "harness: %s\n", dlerror());
    return 2;
  }
  /* POSIX's way to a function from dlsym: ISO C has no conversion of void * to one. */
  spank_f *init, *task_init;
  *(void **)&init = dlsym(plugin, "slurm_spank_init");
  *(void **)&task_init = dlsym(plugin, "slurm_spank_task_init");
  if (init == NULL || task_init == NULL) {
    fprintf(stderr, "harness: the plugin lacks slurm_spank_init or slurm_spank_task_init\n");
    return 2;
  }
  context = context_named(argv[2]);
  int opts = find(argc, argv, "--options"), args = find(argc, argv, "--argv");
  printf("init rc=%d\n", init(NULL, opts - 3, argv + 3));
  printf("registered %d\n", option_count);
  for (int i = opts + 1; i < args; i++)
    give_option(argv[i]);
  task_argc = argc - args - 1;
  task_argv = argv + args + 1;
  if (context == S_CTX_REMOTE && task_argc > 0) {
    printf("task_init rc=%d\n", task_init(NULL, 0, NULL));
    printf("argv0 %s\n", task_argv[0]);
  }
  return 0;
}

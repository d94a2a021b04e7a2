/*
 * jobrt's SPANK plugin (docs/slurm.md, "srun --runtime and --container-image: the SPANK plugin"):
 * gives srun jobrt's --runtime and pyxis's container options, and runs each task of a step that
 * uses them as `jobrt exec`. Nothing of a runtime is here: slurmstepd executes jobrt's entry in the
 * place of the task's program, and `jobrt exec` does the rest as it does under `srun jobrt exec`
 * (one jobrt per node per step, docs/node-step.md). Every slurmstepd hook runs as Slurm intends,
 * TaskProlog and the task's limits included, since the plugin only names the program.
 *
 * plugstack.conf:  required /path/to/jobrtspank.so jobrt=/path/to/jobrt
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "options.h"

SPANK_PLUGIN(jobrt, 1)

/* The variable that names the task's own program to jobrt's entry (packages/cli/src/jobrt.pl). */
#define PROGRAM_VARIABLE "JOBRT_SPANK_PROGRAM"

/* A process serves one srun, sbatch or step: its options live as long as it does. */
static struct spank_option registered[JOBRT_OPTION_COUNT];
static char *given[JOBRT_OPTION_COUNT];
static char *entry;

static int option_given(int val, const char *optarg, int remote);

static int parse_arguments(int ac, char **av)
{
  for (int i = 0; i < ac; i++) {
    if (strncmp(av[i], "jobrt=", 6) == 0 && av[i][6] == '/') {
      free(entry);
      entry = strdup(av[i] + 6);
      continue;
    }
    slurm_error("jobrt: plugstack.conf: %s: the plugin takes jobrt=/absolute/path/of/jobrt only", av[i]);
    return -1;
  }
  if (entry == NULL && spank_context() == S_CTX_REMOTE) {
    slurm_error("jobrt: plugstack.conf: the plugin needs jobrt=/absolute/path/of/jobrt");
    return -1;
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
    return 0;
  if (parse_arguments(ac, av) != 0)
    return -1;
  for (int i = 0; i < JOBRT_OPTION_COUNT; i++) {
    const struct jobrt_option *o = &jobrt_options[i];
    registered[i] = (struct spank_option){(char *)o->name, (char *)o->arg, (char *)o->usage,
                                          o->arg != NULL, i, option_given};
    if (spank_option_register(sp, &registered[i]) != ESPANK_SUCCESS) {
      slurm_error("jobrt: cannot register --%s (does another plugin have it?)", o->name);
      return -1;
    }
  }
  return 0;
}

/* Refusals come at submission (srun, sbatch, salloc), in one line naming the option. */
static int option_given(int val, const char *optarg, int remote)
{
  if (val < 0 || val >= JOBRT_OPTION_COUNT)
    return -1;
  const struct jobrt_option *o = &jobrt_options[val];
  if (o->refused != NULL) {
    slurm_error("jobrt: --%s: %s", o->name, o->refused);
    return -1;
  }
  if (!remote && spank_context() == S_CTX_ALLOCATOR) {
    slurm_error("jobrt: --%s: sbatch and salloc do not take jobrt's options; give them to srun", o->name);
    return -1;
  }
  if (optarg != NULL && strchr(optarg, '\n') != NULL) {
    slurm_error("jobrt: --%s: a value with a line break", o->name);
    return -1;
  }
  free(given[val]);
  given[val] = strdup(optarg != NULL ? optarg : "");
  return given[val] == NULL ? -1 : 0;
}

static int anything_given(void)
{
  for (int i = 0; i < JOBRT_OPTION_COUNT; i++)
    if (given[i] != NULL)
      return 1;
  return 0;
}

/* The options srun gave, as JOBRT_OPTIONS_VARIABLE holds them: a NAME=VALUE line each. */
static char *encoded_options(void)
{
  size_t size = 1;
  for (int i = 0; i < JOBRT_OPTION_COUNT; i++)
    if (given[i] != NULL)
      size += strlen(jobrt_options[i].name) + strlen(given[i]) + 2;
  char *text = malloc(size);
  if (text == NULL)
    return NULL;
  char *end = text;
  *end = '\0';
  for (int i = 0; i < JOBRT_OPTION_COUNT; i++)
    if (given[i] != NULL)
      end += sprintf(end, "%s=%s\n", jobrt_options[i].name, given[i]);
  return text;
}

/*
 * Under srun --multi-prog the job's argv is the file's name and text, and each task runs a line
 * of it that this argv does not hold: such a task would run without jobrt. The text is lines of
 * task ranges and commands ("0-3 ./a.out", "* ./b.out"); a program's one argument of several lines
 * that begins with a digit would be taken for it.
 */
static int multi_prog(int argc, char **argv)
{
  if (argc != 2 || strchr(argv[1], '\n') == NULL)
    return 0;
  const char *p = argv[1] + strspn(argv[1], " \t\n");
  return (*p >= '0' && *p <= '9') || *p == '*' || *p == '#';
}

/*
 * Slurm 22.05 hands a SPANK plugin one value per option for a whole heterogeneous step, whichever
 * component srun's line gave it to: a runtime asked for one component would run them all.
 */
static int heterogeneous(spank_t sp)
{
  char size[16];
  return spank_getenv(sp, "SLURM_HET_SIZE", size, sizeof size) == ESPANK_SUCCESS;
}

/*
 * In the task's own process, as the job's user, just before slurmstepd's last steps and its
 * execve of argv[0]: argv[0] becomes jobrt's entry, which finds the program in PROGRAM_VARIABLE.
 */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
  (void)ac;
  (void)av;
  int argc = 0;
  char **argv = NULL;
  if (!anything_given())
    return 0;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1) {
    slurm_error("jobrt: cannot read the task's command line");
    return -1;
  }
  if (multi_prog(argc, argv)) {
    slurm_error("jobrt: srun --multi-prog does not take jobrt's options: give each line jobrt exec and its options");
    return -1;
  }
  if (heterogeneous(sp)) {
    slurm_error("jobrt: a heterogeneous step does not take jobrt's SPANK options (Slurm gives them to every "
                "component alike): give each component jobrt exec and its options");
    return -1;
  }
  if (access(entry, X_OK) != 0) {
    slurm_error("jobrt: plugstack.conf jobrt=%s: %s", entry, strerror(errno));
    return -1;
  }
  char *options = encoded_options();
  int failed = options == NULL || spank_setenv(sp, JOBRT_OPTIONS_VARIABLE, options, 1) != ESPANK_SUCCESS ||
               spank_setenv(sp, PROGRAM_VARIABLE, argv[0], 1) != ESPANK_SUCCESS;
  free(options);
  if (failed) {
    slurm_error("jobrt: cannot hand the task's options to jobrt");
    return -1;
  }
  /* The entry's path lives as long as this process, which execs it next. */
  argv[0] = entry;
  return 0;
}

# The slurm.conf settings every Slurm cluster Foundry starts shares (single-node slurm.sh and the
# multi-node namespaces of multinode/up.sh): munge auth, fixed ports, no cgroups on this kind of
# machine, a quick scheduler, job completions to a text file, no accounting database.
# Source it, then: slurm_conf_common   (prints the lines; each script adds its paths and nodes)
slurm_conf_common() {
  cat <<'CONF'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
# no cgroups here: /proc based process tracking, no task confinement
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=sched_interval=2
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
JobCompType=jobcomp/filetxt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
CONF
}

cd /work/main
eval "$(tests/cluster/lab env)"
tests/cluster/lab start >/dev/null 2>&1
sed -i '/mpi-pstate-lab/,$d' /etc/openmpi/openmpi-mca-params.conf
U=$(getent passwd 1000 | cut -d: -f1); H=$(getent passwd 1000 | cut -d: -f6)
W=$H/ompi; mkdir -p $W; cp build-26/tests/preload/c_calls.ompi build-26/tests/mpi/hello_c.openmpi $W/; chown -R $U $W
for v in "OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any" "OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self" "OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,uct OMPI_MCA_btl_uct_memory_domains=all"; do
 echo "=== $v"
 su -s /bin/bash $U -c "cd $W; export $v; salloc -t 2 -N2 -n2 -c2 mpirun.openmpi --bind-to none ./c_calls.ompi 2>&1 | tail -12"
done
tests/cluster/lab stop >/dev/null 2>&1

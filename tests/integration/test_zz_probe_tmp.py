import time
from tests.integration.test_azure_modules import *

def test_probe(azure_sim, tmp_path):
    sim = azure_sim
    vm_id = sim.app.seed_vm("single", size="Standard_D2s_v5")
    t = time.time()
    result, run = run_module(sim, tmp_path, "azure_vm_chain_info", {"backend_ids": [vm_id]}, verbosity=0)
    end = time.time()
    print("\nstart", 0)
    for c in sim.app.calls:
        print(round(c["time"] - t, 3), c["operation"], c["status"], c["seconds"])
    print("end", round(end - t, 3))

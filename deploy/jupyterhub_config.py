"""JupyterHub settings for a posenc course server (a class of students, a server each).

Where this file goes (deploy/README.md has the full install steps):
- The Littlest JupyterHub (TLJH, up to ~100 students on one machine): copy it to
  /opt/tljh/config/jupyterhub_config.d/posenc.py, then `sudo tljh-config reload hub`.
- Zero to JupyterHub on Kubernetes (Z2JH, beyond): Z2JH sets the spawner's environment from
  its Helm values, so put the same two settings there (singleuser.defaultUrl and
  singleuser.extraEnv; deploy/README.md shows them).

It sets only what the course needs and leaves login and spawning to the distribution: TLJH
runs each student's server as a Unix user of their own (SystemdSpawner, `jupyter-<name>`,
home /home/jupyter-<name>); Z2JH runs a pod with a volume of its own per student
(KubeSpawner). Either way a student's files and processes are theirs alone. The chapters
reach each home through nbgitpuller links (deploy/nbgitpuller_link.py).

tests/test_hub.py loads this file as it is into a throwaway hub on 127.0.0.1 (a password
login, one local process per student) and checks both settings while two students work in a real browser.
"""
c = get_config()  # noqa: F821 (JupyterHub defines get_config for its config files)

# Students land in JupyterLab: the widgets and the chapters' collapsed solutions assume it.
c.Spawner.default_url = "/lab"

# PyTorch starts a thread per core in every kernel: with a room of kernels on one server they
# would fight over the cores. One thread each runs a chapter in seconds.
c.Spawner.environment.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})

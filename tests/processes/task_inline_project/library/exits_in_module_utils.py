from ansible.module_utils.exits import leave

leave()
